package fn

import (
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

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
				convergingTTL:            time.Minute,
				readyTTL:                 10 * time.Minute,
				rotation:                 rotationPolicy{defaultOverlap: 24 * time.Hour, minPeriod: time.Hour, maxPeriod: 87600 * time.Hour},
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
				rotation:                 rotationPolicy{defaultOverlap: 24 * time.Hour, minPeriod: time.Hour, maxPeriod: 87600 * time.Hour},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := newPolicy(tc.in)
			if err != nil {
				t.Fatalf("%s\nnewPolicy(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(policy{}, rotationPolicy{})); diff != "" {
				t.Errorf("%s\nnewPolicy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
