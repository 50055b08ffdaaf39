package v1beta1_test

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	"github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// These tests exercise the hand-written accessors of both scopes' kinds
// through the shared interfaces, the way a scope-independent controller uses
// them.

func TestWidgetResource(t *testing.T) {
	type spec func() v1beta1.WidgetParameters
	type status func() v1beta1.WidgetObservation
	type initSpec func() v1beta1.WidgetInitParameters

	nw := &namespacedv1beta1.Widget{Spec: namespacedv1beta1.WidgetSpec{ForProvider: v1beta1.WidgetParameters{Size: ptr.To("medium")}}}
	cw := &clusterv1beta1.Widget{Spec: clusterv1beta1.WidgetSpec{ForProvider: v1beta1.WidgetParameters{Size: ptr.To("medium")}}}

	cases := map[string]struct {
		reason string
		mg     v1beta1.WidgetResource
		spec   spec
		init   initSpec
		status status
	}{
		"Namespaced": {
			reason: "The namespaced Widget's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:     nw,
			spec:   func() v1beta1.WidgetParameters { return nw.Spec.ForProvider },
			init:   func() v1beta1.WidgetInitParameters { return nw.Spec.InitProvider },
			status: func() v1beta1.WidgetObservation { return nw.Status.AtProvider },
		},
		"Cluster": {
			reason: "The cluster-scoped Widget's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:     cw,
			spec:   func() v1beta1.WidgetParameters { return cw.Spec.ForProvider },
			init:   func() v1beta1.WidgetInitParameters { return cw.Spec.InitProvider },
			status: func() v1beta1.WidgetObservation { return cw.Status.AtProvider },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.spec(), *tc.mg.GetWidgetParameters()); diff != "" {
				t.Errorf("%s\nGetWidgetParameters(): -want, +got:\n%s", tc.reason, diff)
			}

			// A controller late-initializes through the returned pointer.
			tc.mg.GetWidgetParameters().Description = ptr.To("d")
			tc.mg.GetWidgetInitParameters().Region = ptr.To("eu-west-1")
			wantSpec := v1beta1.WidgetParameters{Size: ptr.To("medium"), Description: ptr.To("d")}
			if diff := cmp.Diff(wantSpec, tc.spec()); diff != "" {
				t.Errorf("%s\nspec after late initialization: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(v1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}, tc.init()); diff != "" {
				t.Errorf("%s\nspec.initProvider after writing through GetWidgetInitParameters(): -want, +got:\n%s", tc.reason, diff)
			}

			created := metav1.Unix(1700000000, 0)
			obs := v1beta1.WidgetObservation{
				ID:         "w-123",
				State:      v1beta1.WidgetStateReady,
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

			tc.mg.GetWidgetObservation().State = v1beta1.WidgetStateResizing
			if got := tc.status().State; got != v1beta1.WidgetStateResizing {
				t.Errorf("%s\nstatus state after writing through GetWidgetObservation(): want %q, got %q", tc.reason, v1beta1.WidgetStateResizing, got)
			}
		})
	}
}

func TestWidgetKeyResource(t *testing.T) {
	nkSet := &namespacedv1beta1.WidgetKey{Spec: namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}}
	nkUnset := &namespacedv1beta1.WidgetKey{}
	ckSet := &clusterv1beta1.WidgetKey{Spec: clusterv1beta1.WidgetKeySpec{ForProvider: clusterv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}}
	ckUnset := &clusterv1beta1.WidgetKey{}

	cases := map[string]struct {
		reason         string
		mg             v1beta1.WidgetKeyResource
		wantWidgetName string
		description    func() *string
		status         func() v1beta1.WidgetKeyObservation
	}{
		"NamespacedWidgetNameSet": {
			reason:         "The namespaced WidgetKey's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:             nkSet,
			wantWidgetName: "w1",
			description:    func() *string { return nkSet.Spec.InitProvider.Description },
			status:         func() v1beta1.WidgetKeyObservation { return nkSet.Status.AtProvider },
		},
		"NamespacedWidgetNameUnresolved": {
			reason:         "A namespaced WidgetKey whose widget name is not resolved yet should report an empty widget name.",
			mg:             nkUnset,
			wantWidgetName: "",
			description:    func() *string { return nkUnset.Spec.InitProvider.Description },
			status:         func() v1beta1.WidgetKeyObservation { return nkUnset.Status.AtProvider },
		},
		"ClusterWidgetNameSet": {
			reason:         "The cluster-scoped WidgetKey's accessors should read and write its spec.forProvider and status.atProvider.",
			mg:             ckSet,
			wantWidgetName: "w1",
			description:    func() *string { return ckSet.Spec.InitProvider.Description },
			status:         func() v1beta1.WidgetKeyObservation { return ckSet.Status.AtProvider },
		},
		"ClusterWidgetNameUnresolved": {
			reason:         "A cluster-scoped WidgetKey whose widget name is not resolved yet should report an empty widget name.",
			mg:             ckUnset,
			wantWidgetName: "",
			description:    func() *string { return ckUnset.Spec.InitProvider.Description },
			status:         func() v1beta1.WidgetKeyObservation { return ckUnset.Status.AtProvider },
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.mg.GetWidgetName(); got != tc.wantWidgetName {
				t.Errorf("%s\nGetWidgetName(): want %q, got %q", tc.reason, tc.wantWidgetName, got)
			}

			tc.mg.GetWidgetKeyInitParameters().Description = ptr.To("ci key")
			if diff := cmp.Diff(ptr.To("ci key"), tc.description()); diff != "" {
				t.Errorf("%s\nspec description after writing through GetWidgetKeyInitParameters(): -want, +got:\n%s", tc.reason, diff)
			}

			obs := v1beta1.WidgetKeyObservation{ID: "k-1", WidgetName: "w1", Description: "ci key"}
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
		mg     v1beta1.WidgetKeyResource
		want   want
	}{
		"NamespacedRef": {
			reason: "A namespaced WidgetKey's widgetNameRef should resolve to the external name of the Widget of that name in the key's namespace.",
			mg: &namespacedv1beta1.WidgetKey{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "key"},
				Spec: namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{
					WidgetNameRef: &xpv2.NamespacedReference{Name: "my-widget"},
				}},
			},
			want: want{key: client.ObjectKey{Namespace: "team-a", Name: "my-widget"}, widgetName: "team-a-my-widget"},
		},
		"ClusterRef": {
			reason: "A cluster-scoped WidgetKey's widgetNameRef should resolve to the external name of the cluster-scoped Widget of that name.",
			mg: &clusterv1beta1.WidgetKey{
				ObjectMeta: metav1.ObjectMeta{Name: "key"},
				Spec: clusterv1beta1.WidgetKeySpec{ForProvider: clusterv1beta1.WidgetKeyParameters{
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
