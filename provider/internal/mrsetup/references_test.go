package mrsetup

import (
	"context"
	"errors"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestLocalReferences(t *testing.T) {
	errBoom := errors.New("boom")
	key := func(ref *xpv2.NamespacedReference, sel *xpv2.NamespacedSelector) *nsv1beta1.WidgetKey {
		k := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}}
		k.Spec.ForProvider.WidgetNameRef = ref
		k.Spec.ForProvider.WidgetNameSelector = sel
		return k
	}
	cases := map[string]struct {
		reason   string
		mg       resource.Managed
		next     error
		wantErr  error
		wantMsg  string
		wantNext bool
	}{
		"OwnNamespace": {
			reason:   "A reference without a namespace is resolved.",
			mg:       key(&xpv2.NamespacedReference{Name: "web"}, nil),
			wantNext: true,
		},
		"OwnNamespaceNamed": {
			reason:   "A reference naming the resource's own namespace is resolved.",
			mg:       key(&xpv2.NamespacedReference{Name: "web", Namespace: "team-a"}, nil),
			wantNext: true,
		},
		"ReferenceIntoAnotherNamespace": {
			reason:  "A reference into another namespace fails before anything is read.",
			mg:      key(&xpv2.NamespacedReference{Name: "web", Namespace: "team-b"}, nil),
			wantErr: cmpopts.AnyError,
			wantMsg: `spec.forProvider.widgetNameRef.namespace is "team-b", but a namespaced resource can reference only resources in its own namespace "team-a": remove spec.forProvider.widgetNameRef.namespace`,
		},
		"SelectorIntoAnotherNamespace": {
			reason:  "A selector into another namespace fails before anything is listed.",
			mg:      key(nil, &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}, Namespace: "team-b"}),
			wantErr: cmpopts.AnyError,
			wantMsg: `spec.forProvider.widgetNameSelector.namespace is "team-b", but a namespaced resource can reference only resources in its own namespace "team-a": remove spec.forProvider.widgetNameSelector.namespace`,
		},
		"Cluster": {
			reason:   "Cluster-scoped resources are not confined.",
			mg:       &clusterv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Name: "ci"}},
			wantNext: true,
		},
		"NextFails": {
			reason:   "The wrapped resolver's error is returned as is.",
			mg:       key(&xpv2.NamespacedReference{Name: "web"}, nil),
			next:     errBoom,
			wantErr:  errBoom,
			wantNext: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			called := false
			next := managed.ReferenceResolverFn(func(context.Context, resource.Managed) error {
				called = true
				return tc.next
			})
			err := LocalReferences(next).ResolveReferences(context.Background(), tc.mg)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nResolveReferences(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if tc.wantMsg != "" && err != nil && err.Error() != tc.wantMsg {
				t.Errorf("%s\nResolveReferences(...): want message\n%s\ngot\n%s", tc.reason, tc.wantMsg, err)
			}
			if called != tc.wantNext {
				t.Errorf("%s\nwrapped resolver called: want %t, got %t", tc.reason, tc.wantNext, called)
			}
		})
	}
}
