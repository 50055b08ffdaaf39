package mrsetup

import (
	"context"
	"errors"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestForgettingFinalizer: the change feed forgets a resource once its
// finalizer is removed. Without a change feed the stock path has no
// forgettingFinalizer (stock.go); TestStockAndLeanLife removes a finalizer
// without one.
func TestForgettingFinalizer(t *testing.T) {
	cases := map[string]struct {
		reason     string
		err        error
		wantForgot []types.NamespacedName
	}{
		"Removed": {
			reason:     "Once the finalizer is removed the resource is gone: the change feed is told to forget it.",
			wantForgot: []types.NamespacedName{{Namespace: "team-a", Name: "w"}},
		},
		"RemoveFailed": {
			reason: "A resource whose finalizer could not be removed still exists and is still followed.",
			err:    errBoom,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := &test.MockClient{MockUpdate: func(context.Context, client.Object, ...client.UpdateOption) error { return tc.err }}
			var forgot []types.NamespacedName
			f := &forgettingFinalizer{Finalizer: resource.NewAPIFinalizer(kube, managed.FinalizerName),
				forget: func(k types.NamespacedName) { forgot = append(forgot, k) }}
			mg := newWidget("uid-1", "1")
			mg.SetNamespace("team-a")
			mg.SetName("w")
			meta.AddFinalizer(mg, managed.FinalizerName)
			if err := f.RemoveFinalizer(t.Context(), mg); !errors.Is(err, tc.err) {
				t.Fatalf("%s\nRemoveFinalizer(): want error %v, got %v", tc.reason, tc.err, err)
			}
			if diff := cmp.Diff(tc.wantForgot, forgot); diff != "" {
				t.Errorf("%s\nforgotten: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
