package mrsetup

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// A Releaser gives up a managed resource's claim on its external resource
// when the resource is deleted and its policies keep the external resource
// (management policies without Delete, or deletionPolicy Orphan): an
// orphaned external resource must be free for another resource to adopt.
// A connector that implements Releaser is asked to release before the
// finalizer goes; while Release fails, the finalizer stays and the
// reconciler retries.
//
// crossplane-runtime removes the finalizer of an orphaned resource without
// connecting or observing (managed reconciler, v2.4.0), so this is the one
// place where the provider still sees the resource. Release must be
// idempotent, and must leave alone an external resource that is not (or no
// longer) this resource's.
type Releaser[T resource.Managed] interface {
	Release(ctx context.Context, mg T) error
}

// releasingFinalizer calls release before it removes the finalizer of an
// orphaned resource of type T. It removes finalizers of resources that are
// not being orphaned (their external resource is gone, or was never theirs)
// directly.
type releasingFinalizer[T resource.Managed] struct {
	resource.Finalizer
	release  func(ctx context.Context, mg T) error
	policies bool
}

func (f *releasingFinalizer[T]) RemoveFinalizer(ctx context.Context, o resource.Object) error {
	if mg, ok := o.(T); ok && orphaned(mg, f.policies) {
		if err := f.release(ctx, mg); err != nil {
			return errors.Wrap(err, "cannot release the external resource of an orphaned resource")
		}
	}
	return f.Finalizer.RemoveFinalizer(ctx, o)
}

// orphaned reports whether mg is being deleted without its external
// resource, deciding as crossplane-runtime's reconciler does (policies says
// whether management policies are enabled).
func orphaned(mg resource.Managed, policies bool) bool {
	if !meta.WasDeleted(mg) {
		return false
	}
	// Cluster-scoped MRs exist for legacy claims on purpose, with their
	// deletionPolicy.
	if l, ok := mg.(resource.LegacyManaged); ok { //nolint:staticcheck // see above
		return !managed.NewLegacyManagementPoliciesResolver( //nolint:staticcheck // see above
			policies, mg.GetManagementPolicies(), l.GetDeletionPolicy()).ShouldDelete()
	}
	return !managed.NewManagementPoliciesResolver(policies, mg.GetManagementPolicies()).ShouldDelete()
}
