package fn

import (
	"slices"
	"strings"
	"testing"
	"time"

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
