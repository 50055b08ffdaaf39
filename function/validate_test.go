package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

func TestValidateInput(t *testing.T) {
	rules := field.NewPath("rules")
	defaults := field.NewPath("defaults")

	cases := map[string]struct {
		reason string
		in     *v1beta1.WidgetPolicy
		want   field.ErrorList
	}{
		"Empty": {
			reason: "An empty input is valid: every field has a default.",
			in:     &v1beta1.WidgetPolicy{},
		},
		"Complete": {
			reason: "An input that sets every field consistently is valid.",
			in: &v1beta1.WidgetPolicy{
				TypeMeta: metav1.TypeMeta{APIVersion: "fn.widgetco.io/v1beta1", Kind: "WidgetPolicy"},
				Defaults: v1beta1.Defaults{Size: "medium", Region: "eu-west-1", Keys: ptr.To[int32](2), Labels: map[string]string{"cost-center": "42"}},
				Rules: v1beta1.Rules{
					AllowedSizes:   []v1beta1.Size{"medium", "large"},
					AllowedRegions: []string{"eu-west-1"},
					RequiredLabels: []string{"team"},
					MaxKeys:        ptr.To[int32](5),
				},
				Namespaced: v1beta1.Namespaced{ProviderConfigRef: &v1beta1.NamespacedProviderConfigReference{Kind: "ProviderConfig", Name: "widgets"}},
				Legacy:     v1beta1.Legacy{ProviderConfigRef: &v1beta1.LegacyProviderConfigReference{Name: "widgets"}, ConnectionSecretNamespace: "widget-secrets"},
				TTL:        v1beta1.TTL{Converging: &metav1.Duration{Duration: time.Second}, Ready: &metav1.Duration{Duration: time.Hour}},
			},
		},
		"WrongKind": {
			reason: "An input of another apiVersion and kind, such as another function's, is invalid.",
			in:     &v1beta1.WidgetPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "template.fn.crossplane.io/v1beta1", Kind: "Input"}},
			want: field.ErrorList{
				field.NotSupported(field.NewPath("apiVersion"), "template.fn.crossplane.io/v1beta1", []string{"fn.widgetco.io/v1beta1"}),
				field.NotSupported(field.NewPath("kind"), "Input", []string{"WidgetPolicy"}),
			},
		},
		"UnknownSize": {
			reason: "An allowed size the Widget API does not offer is invalid.",
			in:     &v1beta1.WidgetPolicy{Rules: v1beta1.Rules{AllowedSizes: []v1beta1.Size{"small", "huge"}}},
			want:   field.ErrorList{field.NotSupported(rules.Child("allowedSizes").Index(1), v1beta1.Size("huge"), v1beta1.Sizes)},
		},
		"DefaultSizeNotAllowed": {
			reason: "A default size the rules do not allow is invalid.",
			in:     &v1beta1.WidgetPolicy{Defaults: v1beta1.Defaults{Size: "large"}, Rules: v1beta1.Rules{AllowedSizes: []v1beta1.Size{"small", "medium"}}},
			want:   field.ErrorList{field.NotSupported(defaults.Child("size"), v1beta1.Size("large"), []v1beta1.Size{"small", "medium"})},
		},
		"BuiltInDefaultSizeNotAllowed": {
			reason: "Rules that do not allow the built-in default size need a default size.",
			in:     &v1beta1.WidgetPolicy{Rules: v1beta1.Rules{AllowedSizes: []v1beta1.Size{"large"}}},
			want:   field.ErrorList{field.Required(defaults.Child("size"), `rules.allowedSizes does not allow the built-in default "small", so set a default size it allows`)},
		},
		"BadRegions": {
			reason: "Regions must look like us-east-1, and the default region must be allowed.",
			in:     &v1beta1.WidgetPolicy{Defaults: v1beta1.Defaults{Region: "us-west-2"}, Rules: v1beta1.Rules{AllowedRegions: []string{"US_EAST"}}},
			want: field.ErrorList{
				field.Invalid(rules.Child("allowedRegions").Index(0), "US_EAST", "must be a region such as us-east-1: lowercase words and a number, separated by '-', at most 32 characters"),
				field.NotSupported(defaults.Child("region"), "us-west-2", []string{"US_EAST"}),
			},
		},
		"TooManyKeys": {
			reason: "The default number of keys may not exceed the maximum, and the maximum may not exceed 10.",
			in:     &v1beta1.WidgetPolicy{Defaults: v1beta1.Defaults{Keys: ptr.To[int32](4)}, Rules: v1beta1.Rules{MaxKeys: ptr.To[int32](11)}},
			want: field.ErrorList{
				field.Invalid(rules.Child("maxKeys"), int32(11), "must be between 0 and 10"),
			},
		},
		"DefaultKeysAboveDefaultMax": {
			reason: "The default number of keys may not exceed the built-in maximum of 3.",
			in:     &v1beta1.WidgetPolicy{Defaults: v1beta1.Defaults{Keys: ptr.To[int32](4)}},
			want:   field.ErrorList{field.Invalid(defaults.Child("keys"), int32(4), "must be between 0 and rules.maxKeys (3)")},
		},
		"BadLabels": {
			reason: "Label keys must be valid and not use the provider's reserved prefix, in defaults and in required labels.",
			in: &v1beta1.WidgetPolicy{
				Defaults: v1beta1.Defaults{Labels: map[string]string{"widgetco.io/owner": "x", "ok": strings.Repeat("v", 64)}},
				Rules:    v1beta1.Rules{RequiredLabels: []string{"Team"}},
			},
			want: field.ErrorList{
				field.Invalid(rules.Child("requiredLabels").Index(0), "Team", "must be 1 to 63 lowercase letters, digits, '.', '_', '-' or '/', starting and ending with a letter or digit"),
				field.TooLong(defaults.Child("labels").Key("ok"), "", 63),
				field.Invalid(defaults.Child("labels").Key("widgetco.io/owner"), "widgetco.io/owner", "the prefix widgetco.io/ is reserved for the provider; use another prefix"),
			},
		},
		"BadProviderConfigs": {
			reason: "ProviderConfig references must name a valid kind and name, and the legacy connection secret namespace must be a valid namespace.",
			in: &v1beta1.WidgetPolicy{
				Namespaced: v1beta1.Namespaced{ProviderConfigRef: &v1beta1.NamespacedProviderConfigReference{Kind: "Secret", Name: "Default"}},
				Legacy:     v1beta1.Legacy{ConnectionSecretNamespace: "Crossplane_System"},
			},
			want: field.ErrorList{
				field.NotSupported(field.NewPath("namespaced", "providerConfigRef", "kind"), v1beta1.ProviderConfigKind("Secret"), []v1beta1.ProviderConfigKind{"ProviderConfig", "ClusterProviderConfig"}),
				field.Invalid(field.NewPath("namespaced", "providerConfigRef", "name"), "Default", "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
				field.Invalid(field.NewPath("legacy", "connectionSecretNamespace"), "Crossplane_System", "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
			},
		},
		"TooManyListItems": {
			reason: "Lists longer than their bound are reported alone, without a message about each of their items, which could be huge.",
			in: &v1beta1.WidgetPolicy{
				Defaults: v1beta1.Defaults{Region: "us-east-1", Labels: manyLabels(1000)},
				Rules: v1beta1.Rules{
					AllowedSizes:   []v1beta1.Size{"huge", "huge", "huge", "huge"},
					AllowedRegions: slices.Repeat([]string{"Moon"}, 65),
					RequiredLabels: slices.Repeat([]string{"Team"}, 32),
				},
			},
			want: field.ErrorList{
				field.TooMany(rules.Child("allowedSizes"), 4, 3),
				field.TooMany(rules.Child("allowedRegions"), 65, 64),
				field.TooMany(rules.Child("requiredLabels"), 32, 31),
				field.TooMany(defaults.Child("labels"), 1000, 31),
			},
		},
		"HugeValues": {
			reason: "A message repeats at most 64 characters of a value, however long it is.",
			in: &v1beta1.WidgetPolicy{
				TypeMeta: metav1.TypeMeta{APIVersion: "fn.widgetco.io/v1beta1", Kind: strings.Repeat("K", 10000)},
				Legacy:   v1beta1.Legacy{ConnectionSecretNamespace: strings.Repeat("n", 10000)},
			},
			want: field.ErrorList{
				field.NotSupported(field.NewPath("kind"), strings.Repeat("K", 64)+"...", []string{"WidgetPolicy"}),
				field.Invalid(field.NewPath("legacy", "connectionSecretNamespace"), strings.Repeat("n", 64)+"...", "must be no more than 63 characters"),
			},
		},
		"NonPositiveTTL": {
			reason: "TTLs must be positive.",
			in:     &v1beta1.WidgetPolicy{TTL: v1beta1.TTL{Converging: &metav1.Duration{}, Ready: &metav1.Duration{Duration: -time.Minute}}},
			want: field.ErrorList{
				field.Invalid(field.NewPath("ttl", "converging"), "0s", "must be a positive duration, such as 30s or 5m"),
				field.Invalid(field.NewPath("ttl", "ready"), "-1m0s", "must be a positive duration, such as 30s or 5m"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := validateInput(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nvalidateInput(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNewPolicy(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     *v1beta1.WidgetPolicy
		want   policy
	}{
		"Defaults": {
			reason: "An empty input should get the built-in defaults.",
			in:     &v1beta1.WidgetPolicy{},
			want: policy{
				defaultSize:              "small",
				defaultKeys:              1,
				maxKeys:                  3,
				namespacedProviderConfig: xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"},
				legacyProviderConfig:     "default",
				legacySecretNamespace:    "crossplane-system",
				convergingTTL:            15 * time.Second,
				readyTTL:                 10 * time.Minute,
			},
		},
		"Set": {
			reason: "Fields the input sets should override the defaults.",
			in: &v1beta1.WidgetPolicy{
				Defaults:   v1beta1.Defaults{Size: "medium", Region: "eu-west-1", Keys: ptr.To[int32](0), Labels: map[string]string{"a": "b"}},
				Rules:      v1beta1.Rules{AllowedSizes: []v1beta1.Size{"medium"}, AllowedRegions: []string{"eu-west-1"}, RequiredLabels: []string{"z", "a"}, MaxKeys: ptr.To[int32](10)},
				Namespaced: v1beta1.Namespaced{ProviderConfigRef: &v1beta1.NamespacedProviderConfigReference{Kind: "ProviderConfig"}},
				Legacy:     v1beta1.Legacy{ProviderConfigRef: &v1beta1.LegacyProviderConfigReference{Name: "legacy"}, ConnectionSecretNamespace: "secrets"},
				TTL:        v1beta1.TTL{Converging: &metav1.Duration{Duration: time.Second}, Ready: &metav1.Duration{Duration: time.Hour}},
			},
			want: policy{
				defaultSize:              "medium",
				defaultRegion:            "eu-west-1",
				defaultKeys:              0,
				defaultLabels:            map[string]string{"a": "b"},
				allowedSizes:             []string{"medium"},
				allowedRegions:           []string{"eu-west-1"},
				requiredLabels:           []string{"a", "z"},
				maxKeys:                  10,
				namespacedProviderConfig: xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"},
				legacyProviderConfig:     "legacy",
				legacySecretNamespace:    "secrets",
				convergingTTL:            time.Second,
				readyTTL:                 time.Hour,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := newPolicy(tc.in)
			if err != nil {
				t.Fatalf("%s\nnewPolicy(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(policy{})); diff != "" {
				t.Errorf("%s\nnewPolicy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	spec := field.NewPath("spec")
	pol, err := newPolicy(&v1beta1.WidgetPolicy{
		Defaults: v1beta1.Defaults{Size: "small", Region: "us-east-1", Labels: map[string]string{"managed-by": "crossplane"}},
		Rules: v1beta1.Rules{
			AllowedSizes:   []v1beta1.Size{"small", "medium"},
			AllowedRegions: []string{"us-east-1", "eu-west-1"},
			RequiredLabels: []string{"team"},
		},
	})
	if err != nil {
		t.Fatalf("newPolicy(): %v", err)
	}
	ns := func(s xwidgetSpec) xwidget {
		return xwidget{flavour: FlavourNamespaced, kind: "XWidget", name: "web", namespace: "team-a", spec: s}
	}
	team := map[string]string{"team": "a"}

	type want struct {
		s    settings
		errs field.ErrorList
	}
	cases := map[string]struct {
		reason string
		x      xwidget
		w      widgetObservation
		want   want
	}{
		"Defaults": {
			reason: "Fields the XR does not set should get the policy's defaults.",
			x:      ns(xwidgetSpec{Labels: team}),
			want: want{s: settings{
				size: "small", region: "us-east-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: "XWidget team-a/web, managed by Crossplane",
				secretName:  "web-connection",
			}},
		},
		"Set": {
			reason: "Fields the XR sets should win over the defaults, its labels over default labels of the same key.",
			x: ns(xwidgetSpec{
				Size: ptr.To("medium"), Region: ptr.To("eu-west-1"), Keys: ptr.To[int64](3),
				Labels:                     map[string]string{"team": "a", "managed-by": "me"},
				Description:                ptr.To("mine"),
				WriteConnectionSecretToRef: &localSecretReference{Name: "my-secret"},
			}),
			want: want{s: settings{
				size: "medium", region: "eu-west-1", keys: 3,
				labels:      map[string]string{"managed-by": "me", "team": "a"},
				description: "mine",
				secretName:  "my-secret",
			}},
		},
		"Legacy": {
			reason: "A legacy XR should be described by its claim and get no connection Secret: Crossplane's writeConnectionSecretToRef of the XR is not ours.",
			x: xwidget{
				flavour: FlavourLegacy, kind: "XWidget", name: "web-5t2xq", claim: "team-b/web", claimKind: "WidgetClaim",
				spec: xwidgetSpec{Labels: team, WriteConnectionSecretToRef: &localSecretReference{Name: "0d6c5a8e"}},
			},
			want: want{s: settings{
				size: "small", region: "us-east-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: "WidgetClaim team-b/web, managed by Crossplane",
			}},
		},
		"ExistingRegionKept": {
			reason: "A widget that exists keeps its region even when the policy's default region changed since it was created.",
			x:      ns(xwidgetSpec{Labels: team}),
			w:      widgetObservation{exists: true, region: "ap-south-1"},
			want: want{s: settings{
				size: "small", region: "ap-south-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: "XWidget team-a/web, managed by Crossplane",
				secretName:  "web-connection",
			}},
		},
		"ExistingRegionGrandfathered": {
			reason: "An XR may keep asking for the region its widget has, even when the policy no longer allows it for new widgets.",
			x:      ns(xwidgetSpec{Labels: team, Region: ptr.To("ap-south-1")}),
			w:      widgetObservation{exists: true, region: "ap-south-1"},
			want: want{s: settings{
				size: "small", region: "ap-south-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: "XWidget team-a/web, managed by Crossplane",
				secretName:  "web-connection",
			}},
		},
		"RegionCannotMove": {
			reason: "An XR may not ask for another region than the one its widget has.",
			x:      ns(xwidgetSpec{Labels: team, Region: ptr.To("eu-west-1")}),
			w:      widgetObservation{exists: true, region: "us-east-1"},
			want: want{errs: field.ErrorList{
				field.Invalid(spec.Child("region"), "eu-west-1", "the widget already runs in us-east-1 and cannot move: set us-east-1 or remove the field, or create a new XWidget for another region"),
			}},
		},
		"Violations": {
			reason: "Every field that violates the policy should be reported, with what the policy allows.",
			x: ns(xwidgetSpec{
				Size: ptr.To("large"), Region: ptr.To("ap-south-1"), Keys: ptr.To[int64](4),
				Labels:      map[string]string{"widgetco.io/owner": "me"},
				Description: ptr.To(strings.Repeat("d", 257)),
			}),
			want: want{errs: field.ErrorList{
				field.NotSupported(spec.Child("size"), "large", []string{"small", "medium"}),
				field.NotSupported(spec.Child("region"), "ap-south-1", []string{"us-east-1", "eu-west-1"}),
				field.Invalid(spec.Child("keys"), int64(4), "the platform allows 0 to 3 access keys"),
				field.Invalid(spec.Child("labels").Key("widgetco.io/owner"), "widgetco.io/owner", "the prefix widgetco.io/ is reserved for the provider; use another prefix"),
				field.Required(spec.Child("labels").Key("team"), "the platform requires every widget to have this label"),
				field.TooLong(spec.Child("description"), "", 256),
			}},
		},
		"BadRegion": {
			reason: "A region that is not a region should be reported as such.",
			x:      ns(xwidgetSpec{Labels: team, Region: ptr.To("Moon")}),
			want: want{errs: field.ErrorList{
				field.Invalid(spec.Child("region"), "Moon", "must be a region such as us-east-1: lowercase words and a number, separated by '-', at most 32 characters"),
			}},
		},
		"TooManyLabelsWithDefaults": {
			reason: "The XR's labels and the policy's default labels together may not exceed the 31 a Widget may carry.",
			x: ns(xwidgetSpec{Labels: func() map[string]string {
				l := map[string]string{"team": "a"}
				for _, c := range "abcdefghijklmnopqrstuvwxyz0123" {
					l["l"+string(c)] = "v"
				}
				return l
			}()}),
			want: want{errs: field.ErrorList{field.TooMany(spec.Child("labels"), 32, 30)}},
		},
		"KeysFarAboveTheMaximum": {
			reason: "A number of keys above the maximum should be reported, and nothing should be done for each key it asks for: the connection Secret's name is not compared with a billion key secrets.",
			x:      ns(xwidgetSpec{Labels: team, Keys: ptr.To[int64](1_000_000_000), WriteConnectionSecretToRef: &localSecretReference{Name: "web-key-0"}}),
			want: want{errs: field.ErrorList{
				field.Invalid(spec.Child("keys"), int64(1_000_000_000), "the platform allows 0 to 3 access keys"),
			}},
		},
		"KeysBeyondInt32": {
			reason: "A number of keys no int32 holds should be reported as it is, not wrapped around into range.",
			x:      ns(xwidgetSpec{Labels: team, Keys: ptr.To[int64](1 << 32)}),
			want: want{errs: field.ErrorList{
				field.Invalid(spec.Child("keys"), int64(4294967296), "the platform allows 0 to 3 access keys"),
			}},
		},
		"MultibyteDescription": {
			reason: "A description of 256 characters is allowed however many bytes they take: the CRD and the Widget API count characters.",
			x:      ns(xwidgetSpec{Labels: team, Description: ptr.To(strings.Repeat("é", 256))}),
			want: want{s: settings{
				size: "small", region: "us-east-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: strings.Repeat("é", 256),
				secretName:  "web-connection",
			}},
		},
		"MultibyteDescriptionTooLong": {
			reason: "A description of 257 characters is too long.",
			x:      ns(xwidgetSpec{Labels: team, Description: ptr.To(strings.Repeat("é", 257))}),
			want:   want{errs: field.ErrorList{field.TooLong(spec.Child("description"), "", 256)}},
		},
		"DescriptionWithTabsAndNewlines": {
			reason: "Tabs and newlines are allowed in a description.",
			x:      ns(xwidgetSpec{Labels: team, Description: ptr.To("first line\n\tsecond line")}),
			want: want{s: settings{
				size: "small", region: "us-east-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: "first line\n\tsecond line",
				secretName:  "web-connection",
			}},
		},
		"UnprintableValues": {
			reason: "A description or label value with control characters, which the Widget CRD or the Widget API reject, should be reported without repeating it.",
			x: ns(xwidgetSpec{
				Labels:      map[string]string{"team": "a\x1b[31m"},
				Description: ptr.To("nul\x00"),
			}),
			want: want{errs: field.ErrorList{
				field.Invalid(spec.Child("labels").Key("team"), field.OmitValueType{}, "the value must hold only printable characters: letters, digits, punctuation, symbols and spaces"),
				field.Invalid(spec.Child("description"), field.OmitValueType{}, "must hold only printable characters (letters, digits, punctuation, symbols), spaces, tabs and newlines"),
			}},
		},
		"ManyInvalidLabels": {
			reason: "More labels than a widget may carry should be reported alone, not with a message about each of them.",
			x:      ns(xwidgetSpec{Labels: manyLabels(1000)}),
			want:   want{errs: field.ErrorList{field.TooMany(spec.Child("labels"), 1000, 31)}},
		},
		"HugeValues": {
			reason: "A message should repeat at most 64 characters of a value, however long it is.",
			x: ns(xwidgetSpec{
				Size:                       ptr.To(strings.Repeat("s", 10000)),
				Region:                     ptr.To(strings.Repeat("r", 10000)),
				Labels:                     map[string]string{"team": "a", strings.Repeat("k", 10000): "v"},
				WriteConnectionSecretToRef: &localSecretReference{Name: strings.Repeat("n", 10000)},
			}),
			want: want{errs: field.ErrorList{
				field.NotSupported(spec.Child("size"), strings.Repeat("s", 64)+"...", []string{"small", "medium"}),
				field.Invalid(spec.Child("region"), strings.Repeat("r", 64)+"...", "must be a region such as us-east-1: lowercase words and a number, separated by '-', at most 32 characters"),
				field.Invalid(spec.Child("labels").Key(strings.Repeat("k", 64)+"..."), strings.Repeat("k", 64)+"...", "must be 1 to 63 lowercase letters, digits, '.', '_', '-' or '/', starting and ending with a letter or digit"),
				field.Invalid(spec.Child("writeConnectionSecretToRef", "name"), strings.Repeat("n", 64)+"...", "must be no more than 253 characters"),
			}},
		},
		"LongNameDescription": {
			reason: "A default description longer than 256 characters, from a long XR name, should be shortened to 256 on a character boundary.",
			x:      xwidget{flavour: FlavourNamespaced, kind: "XWidget", name: strings.Repeat("a", 219), namespace: "team-a", spec: xwidgetSpec{Labels: team}},
			want: want{s: settings{
				size: "small", region: "us-east-1", keys: 1,
				labels:      map[string]string{"managed-by": "crossplane", "team": "a"},
				description: "XWidget team-a/" + strings.Repeat("a", 215) + "..., managed by Crossplane",
				secretName:  strings.Repeat("a", 219) + "-connection",
			}},
		},
		"SecretNameClash": {
			reason: "The connection Secret may not be the connection secret of one of the XR's WidgetKeys.",
			x:      ns(xwidgetSpec{Labels: team, WriteConnectionSecretToRef: &localSecretReference{Name: "web-key-0"}}),
			want: want{errs: field.ErrorList{
				field.Invalid(spec.Child("writeConnectionSecretToRef", "name"), "web-key-0", "is the name of the connection secret of access key 0; choose another name"),
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolve(tc.x, pol, tc.w)
			if diff := cmp.Diff(tc.want.errs, fieldErrors(t, err)); diff != "" {
				t.Errorf("%s\nresolve(...): -want errors, +got errors:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want.s, got, cmp.AllowUnexported(settings{})); diff != "" {
				t.Errorf("%s\nresolve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// manyLabels returns n labels whose keys are invalid: uppercase.
func manyLabels(n int) map[string]string {
	l := make(map[string]string, n)
	for i := range n {
		l[fmt.Sprintf("K%d", i)] = "v"
	}
	return l
}

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		reason string
		prefix string
		who    string
		want   string
	}{
		"Fits": {
			reason: "A description that fits is the prefix, who and the suffix.",
			prefix: "Access key 0 of ",
			who:    "XWidget team-a/web",
			want:   "Access key 0 of XWidget team-a/web, managed by Crossplane",
		},
		"FitsExactly": {
			reason: "A description of exactly 256 characters is not shortened.",
			who:    strings.Repeat("w", 233),
			want:   strings.Repeat("w", 233) + ", managed by Crossplane",
		},
		"OneTooLong": {
			reason: "A description of 257 characters is shortened to 256, marked with '...'.",
			who:    strings.Repeat("w", 234),
			want:   strings.Repeat("w", 230) + "..., managed by Crossplane",
		},
		"Multibyte": {
			reason: "Who is shortened on a character boundary, counting characters, not bytes.",
			who:    strings.Repeat("ü", 300),
			want:   strings.Repeat("ü", 230) + "..., managed by Crossplane",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := describe(tc.prefix, tc.who, ", managed by Crossplane")
			if got != tc.want {
				t.Errorf("%s\ndescribe(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

func TestShown(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"Short":     {reason: "A value of at most 64 characters is shown as it is.", in: strings.Repeat("v", 64), want: strings.Repeat("v", 64)},
		"Long":      {reason: "A longer value is shortened to 64 characters, marked with '...'.", in: strings.Repeat("v", 65), want: strings.Repeat("v", 64) + "..."},
		"Multibyte": {reason: "A value is shortened on a character boundary.", in: strings.Repeat("ß", 100), want: strings.Repeat("ß", 64) + "..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := shown(tc.in); got != tc.want {
				t.Errorf("%s\nshown(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

// fieldErrors returns the invalid fields of a rejection, or nil for nil.
func fieldErrors(t *testing.T, err error) field.ErrorList {
	t.Helper()
	if err == nil {
		return nil
	}
	r := &rejection{}
	if !errors.As(err, &r) {
		t.Fatalf("want a rejection, got %T: %v", err, err)
	}
	return r.fields
}
