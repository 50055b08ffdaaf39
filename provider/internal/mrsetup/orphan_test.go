package mrsetup

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestReleasingFinalizer(t *testing.T) {
	now := metav1.Now()
	keep := xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}
	type want struct {
		released bool
		removed  bool
		err      error
	}
	cases := map[string]struct {
		reason     string
		mg         resource.Managed
		policies   bool
		releaseErr error
		want       want
	}{
		"DeletedWithDelete": {
			reason:   "A resource deleted with its widget (default policies) has nothing to release.",
			mg:       &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: nsv1beta1.WidgetSpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: xpv2.ManagementPolicies{xpv2.ManagementActionAll}}}},
			policies: true,
			want:     want{removed: true},
		},
		"OrphanedByPolicies": {
			reason:   "A resource deleted with policies without Delete releases its widget before its finalizer goes.",
			mg:       &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: nsv1beta1.WidgetSpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: keep}}},
			policies: true,
			want:     want{released: true, removed: true},
		},
		"ObserveOnly": {
			reason:   "An observe-only resource is orphaned too; Release decides that an import it never took over has no marker of its own.",
			mg:       &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: nsv1beta1.WidgetSpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve}}}},
			policies: true,
			want:     want{released: true, removed: true},
		},
		"OrphanedByDeletionPolicy": {
			reason: "A cluster-scoped resource with deletionPolicy Orphan releases its widget.",
			mg: func() resource.Managed {
				w := &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
				w.Spec.DeletionPolicy = xpv2.DeletionOrphan
				return w
			}(),
			policies: true,
			want:     want{released: true, removed: true},
		},
		"NotDeleted": {
			reason:   "A finalizer removed from a live resource (never, in practice) releases nothing.",
			mg:       &nsv1beta1.Widget{Spec: nsv1beta1.WidgetSpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: keep}}},
			policies: true,
			want:     want{removed: true},
		},
		"ReleaseFails": {
			reason:     "While the release fails the finalizer stays, so the reconciler retries it.",
			mg:         &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: nsv1beta1.WidgetSpec{ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: keep}}},
			policies:   true,
			releaseErr: errBoom,
			want:       want{released: true, err: errBoom},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got want
			f := &releasingFinalizer[resource.Managed]{
				Finalizer: resource.FinalizerFns{RemoveFinalizerFn: func(context.Context, resource.Object) error { got.removed = true; return nil }},
				release:   func(context.Context, resource.Managed) error { got.released = true; return tc.releaseErr },
				policies:  tc.policies,
			}
			got.err = f.RemoveFinalizer(t.Context(), tc.mg)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nRemoveFinalizer(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
