package v1alpha1_test

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	"github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

// These tests exercise the hand-written accessors of both scopes' kinds
// through the shared interfaces, the way a scope-independent controller uses
// them.

func TestWidgetResource(t *testing.T) {
	type spec func() v1alpha1.WidgetParameters
	type status func() v1alpha1.WidgetObservation

	nw := &namespacedv1alpha1.Widget{Spec: namespacedv1alpha1.WidgetSpec{ForProvider: v1alpha1.WidgetParameters{Size: ptr.To("medium")}}}
	cw := &clusterv1alpha1.Widget{Spec: clusterv1alpha1.WidgetSpec{ForProvider: v1alpha1.WidgetParameters{Size: ptr.To("medium")}}}

	cases := map[string]struct {
		reason string
		mg     v1alpha1.WidgetResource
		spec   spec
		status status
	}{
		"Namespaced": {
			reason: "The namespaced Widget's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:     nw,
			spec:   func() v1alpha1.WidgetParameters { return nw.Spec.ForProvider },
			status: func() v1alpha1.WidgetObservation { return nw.Status.AtProvider },
		},
		"Cluster": {
			reason: "The cluster-scoped Widget's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:     cw,
			spec:   func() v1alpha1.WidgetParameters { return cw.Spec.ForProvider },
			status: func() v1alpha1.WidgetObservation { return cw.Status.AtProvider },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.spec(), *tc.mg.GetWidgetParameters()); diff != "" {
				t.Errorf("%s\nGetWidgetParameters(): -want, +got:\n%s", tc.reason, diff)
			}

			// A controller late-initializes through the returned pointer.
			tc.mg.GetWidgetParameters().Region = ptr.To("eu-west-1")
			wantSpec := v1alpha1.WidgetParameters{Size: ptr.To("medium"), Region: ptr.To("eu-west-1")}
			if diff := cmp.Diff(wantSpec, tc.spec()); diff != "" {
				t.Errorf("%s\nspec after late initialization: -want, +got:\n%s", tc.reason, diff)
			}

			created := metav1.Unix(1700000000, 0)
			obs := v1alpha1.WidgetObservation{
				ID:         "w-123",
				State:      v1alpha1.WidgetStateReady,
				Endpoint:   "https://w.example.com",
				Generation: 3,
				Size:       "medium",
				Region:     "eu-west-1",
				Labels:     map[string]string{"team": "a"},
				CreatedAt:  &created,
			}
			tc.mg.SetWidgetObservation(obs)
			if diff := cmp.Diff(obs, tc.status()); diff != "" {
				t.Errorf("%s\nstatus after SetWidgetObservation(): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(obs, *tc.mg.GetWidgetObservation()); diff != "" {
				t.Errorf("%s\nGetWidgetObservation(): -want, +got:\n%s", tc.reason, diff)
			}

			tc.mg.GetWidgetObservation().State = v1alpha1.WidgetStateResizing
			if got := tc.status().State; got != v1alpha1.WidgetStateResizing {
				t.Errorf("%s\nstatus state after writing through GetWidgetObservation(): want %q, got %q", tc.reason, v1alpha1.WidgetStateResizing, got)
			}
		})
	}
}

func TestWidgetKeyResource(t *testing.T) {
	nkSet := &namespacedv1alpha1.WidgetKey{Spec: namespacedv1alpha1.WidgetKeySpec{ForProvider: namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}}
	nkUnset := &namespacedv1alpha1.WidgetKey{}
	ckSet := &clusterv1alpha1.WidgetKey{Spec: clusterv1alpha1.WidgetKeySpec{ForProvider: clusterv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}}
	ckUnset := &clusterv1alpha1.WidgetKey{}

	cases := map[string]struct {
		reason         string
		mg             v1alpha1.WidgetKeyResource
		wantWidgetName string
		description    func() *string
		status         func() v1alpha1.WidgetKeyObservation
	}{
		"NamespacedWidgetNameSet": {
			reason:         "The namespaced WidgetKey's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:             nkSet,
			wantWidgetName: "w1",
			description:    func() *string { return nkSet.Spec.ForProvider.Description },
			status:         func() v1alpha1.WidgetKeyObservation { return nkSet.Status.AtProvider },
		},
		"NamespacedWidgetNameUnresolved": {
			reason:         "A namespaced WidgetKey whose widget name is not resolved yet should report an empty widget name.",
			mg:             nkUnset,
			wantWidgetName: "",
			description:    func() *string { return nkUnset.Spec.ForProvider.Description },
			status:         func() v1alpha1.WidgetKeyObservation { return nkUnset.Status.AtProvider },
		},
		"ClusterWidgetNameSet": {
			reason:         "The cluster-scoped WidgetKey's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:             ckSet,
			wantWidgetName: "w1",
			description:    func() *string { return ckSet.Spec.ForProvider.Description },
			status:         func() v1alpha1.WidgetKeyObservation { return ckSet.Status.AtProvider },
		},
		"ClusterWidgetNameUnresolved": {
			reason:         "A cluster-scoped WidgetKey whose widget name is not resolved yet should report an empty widget name.",
			mg:             ckUnset,
			wantWidgetName: "",
			description:    func() *string { return ckUnset.Spec.ForProvider.Description },
			status:         func() v1alpha1.WidgetKeyObservation { return ckUnset.Status.AtProvider },
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.mg.GetWidgetName(); got != tc.wantWidgetName {
				t.Errorf("%s\nGetWidgetName(): want %q, got %q", tc.reason, tc.wantWidgetName, got)
			}

			tc.mg.GetWidgetKeyParameters().Description = ptr.To("ci key")
			if diff := cmp.Diff(ptr.To("ci key"), tc.description()); diff != "" {
				t.Errorf("%s\nspec description after writing through GetWidgetKeyParameters(): -want, +got:\n%s", tc.reason, diff)
			}

			obs := v1alpha1.WidgetKeyObservation{ID: "k-1", WidgetName: "w1", Description: "ci key"}
			tc.mg.SetWidgetKeyObservation(obs)
			if diff := cmp.Diff(obs, tc.status()); diff != "" {
				t.Errorf("%s\nstatus after SetWidgetKeyObservation(): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(obs, *tc.mg.GetWidgetKeyObservation()); diff != "" {
				t.Errorf("%s\nGetWidgetKeyObservation(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

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

// fakeReader is a client.Reader that serves one managed resource.
type fakeReader struct {
	client.Reader

	GetFn func(key client.ObjectKey, obj client.Object) error
}

func (r *fakeReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return r.GetFn(key, obj)
}

func TestResolveReferences(t *testing.T) {
	type want struct {
		key        client.ObjectKey
		widgetName string
	}

	cases := map[string]struct {
		reason string
		mg     v1alpha1.WidgetKeyResource
		want   want
	}{
		"NamespacedRef": {
			reason: "A namespaced WidgetKey's widgetNameRef should resolve to the external name of the Widget of that name in the key's namespace.",
			mg: &namespacedv1alpha1.WidgetKey{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "key"},
				Spec: namespacedv1alpha1.WidgetKeySpec{ForProvider: namespacedv1alpha1.WidgetKeyParameters{
					WidgetNameRef: &xpv2.NamespacedReference{Name: "my-widget"},
				}},
			},
			want: want{key: client.ObjectKey{Namespace: "team-a", Name: "my-widget"}, widgetName: "team-a-my-widget"},
		},
		"ClusterRef": {
			reason: "A cluster-scoped WidgetKey's widgetNameRef should resolve to the external name of the cluster-scoped Widget of that name.",
			mg: &clusterv1alpha1.WidgetKey{
				ObjectMeta: metav1.ObjectMeta{Name: "key"},
				Spec: clusterv1alpha1.WidgetKeySpec{ForProvider: clusterv1alpha1.WidgetKeyParameters{
					WidgetNameRef: &xpv2.Reference{Name: "my-widget"},
				}},
			},
			want: want{key: client.ObjectKey{Name: "my-widget"}, widgetName: "team-a-my-widget"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var gotKey client.ObjectKey
			r := &fakeReader{GetFn: func(key client.ObjectKey, obj client.Object) error {
				gotKey = key
				meta.SetExternalName(obj, "team-a-my-widget")
				return nil
			}}
			if err := tc.mg.ResolveReferences(context.Background(), r); err != nil {
				t.Fatalf("%s\nResolveReferences(): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.key, gotKey); diff != "" {
				t.Errorf("%s\nWidget fetched: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.widgetName, tc.mg.GetWidgetName()); diff != "" {
				t.Errorf("%s\nGetWidgetName() after resolution: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
