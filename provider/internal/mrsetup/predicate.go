package mrsetup

import (
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/widgetco/crossplane-widget/provider/internal/names"
)

// ForeignAnnotationChanged is layer 1, ownAnnotationsIgnored (see the
// package comment): it stands in for controller-runtime's
// AnnotationChangedPredicate in provider-template's watch filter. It passes
// updates that change a managed resource's
// annotations other than the ones its own reconciler writes while creating:
// the external-create-{pending,succeeded,failed} markers and the default
// external name chosen by the initializer. The reconciler requeues itself
// after those writes, so reacting to their watch events as well only costs
// a reconcile that reads a cache which has not caught up yet. An external
// name set by anyone else (an import) still passes.
// TestRuntimeRequeuesAfterItsOwnCreateWrites and
// TestRuntimeWritesOnlyItsKnownAnnotations pin what it assumes.
type ForeignAnnotationChanged struct {
	predicate.Funcs
}

// ownAnnotations are written by the managed reconciler and our initializer.
var ownAnnotations = []string{
	meta.AnnotationKeyExternalCreatePending,
	meta.AnnotationKeyExternalCreateSucceeded,
	meta.AnnotationKeyExternalCreateFailed,
	names.AnnotationDefaultExternalName,
}

// Update implements predicate.Predicate.
func (ForeignAnnotationChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	return !maps.Equal(foreign(e.ObjectOld), foreign(e.ObjectNew))
}

// foreign returns o's annotations without our own, and without an external
// name that is the default the initializer chose.
func foreign(o client.Object) map[string]string {
	a := maps.Clone(o.GetAnnotations())
	if n, ok := a[names.AnnotationDefaultExternalName]; ok && a[meta.AnnotationKeyExternalName] == n {
		delete(a, meta.AnnotationKeyExternalName)
	}
	for _, k := range ownAnnotations {
		delete(a, k)
	}
	return a
}
