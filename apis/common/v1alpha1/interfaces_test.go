package v1alpha1_test

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	"github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

// These tests exercise the hand-written accessors of the ProviderConfig
// kinds through the shared interface, the way the provider uses them.

func TestProviderConfigResource(t *testing.T) {
	conn := v1alpha1.APIConnection{Endpoint: "https://widgets.example.com", CABundle: "-----BEGIN CERTIFICATE-----"}

	cases := map[string]struct {
		reason string
		pc     v1alpha1.ProviderConfigResource
		want   v1alpha1.ProviderConfigSpec
	}{
		"NamespacedProviderConfig": {
			reason: "A namespaced ProviderConfig's token Secret should resolve to the ProviderConfig's own namespace.",
			pc: &namespacedv1alpha1.ProviderConfig{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"},
				Spec: v1alpha1.LocalProviderConfigSpec{
					APIConnection: conn,
					Credentials: v1alpha1.LocalProviderCredentials{
						Source:    xpv2.CredentialsSourceSecret,
						SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "widget-token"}, Key: "token"},
					},
				},
			},
			want: v1alpha1.ProviderConfigSpec{
				APIConnection: conn,
				Credentials: v1alpha1.ProviderCredentials{
					Source:    xpv2.CredentialsSourceSecret,
					SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "widget-token", Namespace: "team-a"}, Key: "token"},
				},
			},
		},
		"NamespacedProviderConfigWithoutSecretRef": {
			reason: "A namespaced ProviderConfig without a secretRef should resolve to a spec without one.",
			pc: &namespacedv1alpha1.ProviderConfig{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"},
				Spec: v1alpha1.LocalProviderConfigSpec{
					APIConnection: conn,
					Credentials:   v1alpha1.LocalProviderCredentials{Source: xpv2.CredentialsSourceSecret},
				},
			},
			want: v1alpha1.ProviderConfigSpec{
				APIConnection: conn,
				Credentials:   v1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceSecret},
			},
		},
		"ClusterProviderConfig": {
			reason: "A ClusterProviderConfig's spec should be returned as is.",
			pc: &namespacedv1alpha1.ClusterProviderConfig{
				ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: v1alpha1.ProviderConfigSpec{
					APIConnection: conn,
					Credentials: v1alpha1.ProviderCredentials{
						Source:    xpv2.CredentialsSourceSecret,
						SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "widget-token", Namespace: "crossplane-system"}, Key: "token"},
					},
				},
			},
			want: v1alpha1.ProviderConfigSpec{
				APIConnection: conn,
				Credentials: v1alpha1.ProviderCredentials{
					Source:    xpv2.CredentialsSourceSecret,
					SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "widget-token", Namespace: "crossplane-system"}, Key: "token"},
				},
			},
		},
		"LegacyProviderConfig": {
			reason: "A cluster-scoped legacy ProviderConfig's spec should be returned as is.",
			pc: &clusterv1alpha1.ProviderConfig{
				ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: v1alpha1.ProviderConfigSpec{
					APIConnection: conn,
					Credentials: v1alpha1.ProviderCredentials{
						Source:    xpv2.CredentialsSourceSecret,
						SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "widget-token", Namespace: "crossplane-system"}, Key: "token"},
					},
				},
			},
			want: v1alpha1.ProviderConfigSpec{
				APIConnection: conn,
				Credentials: v1alpha1.ProviderCredentials{
					Source:    xpv2.CredentialsSourceSecret,
					SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "widget-token", Namespace: "crossplane-system"}, Key: "token"},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.pc.GetProviderConfigSpec()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nGetProviderConfigSpec(): -want, +got:\n%s", tc.reason, diff)
			}

			// The result is a copy: changing it must not change the config.
			if got.Credentials.SecretRef != nil {
				got.Credentials.SecretRef.Name = "changed"
			}
			got.Endpoint = "https://changed.example.com"
			if diff := cmp.Diff(tc.want, tc.pc.GetProviderConfigSpec()); diff != "" {
				t.Errorf("%s\nGetProviderConfigSpec() after changing a previous result: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
