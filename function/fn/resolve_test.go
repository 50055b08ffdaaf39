package fn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

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
