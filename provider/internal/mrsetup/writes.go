package mrsetup

import (
	"context"
	"reflect"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Layers 4 to 6: fewer writes per new resource. crossplane-runtime's managed
// reconciler, with the stock initializer, writes a new resource six or seven
// times before it is Ready: the default external name, the finalizer, the
// external-create-pending annotation, the external-create-succeeded
// annotation, the status after the create, the status while the Widget API
// provisions, and the Ready status (TestStockAndLeanLife). Every write is
// also a watch event for Crossplane's composite controller, which reconciles
// the XR that composed the resource. Three of them carry nothing new:
//
//   - defaultNameUnwritten: the default external name is deterministic; the
//     initializer sets it in memory and the create-pending update saves it
//     (TestRuntimeSavesCreatePendingWithTheWholeObject). A reference
//     resolver that patches replaces the object with the API server's copy,
//     so reinitializing sets it again after resolving
//     (TestRuntimeInitializesBeforeResolvingReferences).
//   - deferredFinalizer: the finalizer protects an external resource from being left behind. A
//     resource whose external resource does not exist needs no finalizer
//     yet, and when the reconciler goes on to create it, it first writes the
//     external-create-pending annotation, which carries the finalizer too.
//     deferredFinalizer therefore adds the finalizer without a write when
//     the same reconcile observed no external resource
//     (TestRuntimeObservesBeforeAddingFinalizer,
//     TestRuntimeSavesCreatePendingWithTheWholeObject).
//   - succeededUnwritten: the external-create-succeeded annotation tells the reconciler that a
//     create finished, so that it may proceed when an external name chosen
//     by the create could have been lost. This provider's names are
//     deterministic (chosen and saved with external-create-pending, before
//     the create), so crossplane-runtime proceeds either way
//     (WithDeterministicExternalName): succeededUnwritten keeps that
//     annotation in memory without a write of its own. A resource whose
//     create succeeded therefore keeps external-create-pending (when the
//     create was asked for) and no external-create-succeeded. The status
//     Create recorded is then written by the status update that follows,
//     instead of being replaced by the API server's copy
//     (TestRuntimeUpdatesCriticalAnnotationsOnlyAfterCreate,
//     TestRuntimeProceedsPastAnIncompleteCreateWithDeterministicNames).
//
// That leaves three writes of the resource for a new widget: the pending
// update (with the external name and the finalizer), the status after the
// create, and the Ready status.

// savingInitializer initializes a resource with init and saves what init
// changed with an update, as crossplane-runtime's stock initializer
// (managed.NameAsExternalName) does: the stock path, without the layer
// defaultNameUnwritten.
type savingInitializer struct {
	init managed.Initializer
	kube client.Client
}

func (i savingInitializer) Initialize(ctx context.Context, mg resource.Managed) error {
	before := mg.GetAnnotations()[meta.AnnotationKeyExternalName]
	if err := i.init.Initialize(ctx, mg); err != nil {
		return err
	}
	if mg.GetAnnotations()[meta.AnnotationKeyExternalName] == before {
		return nil
	}
	return i.kube.Update(ctx, mg)
}

// reinitializing resolves references with next, then initializes the
// resource again with init: a resolver that changes a reference patches the
// resource and replaces it with the API server's copy, which lacks what
// the initializer set without writing (the default external name).
type reinitializing struct {
	next managed.ReferenceResolver
	init managed.Initializer
}

func (r reinitializing) ResolveReferences(ctx context.Context, mg resource.Managed) error {
	if err := r.next.ResolveReferences(ctx, mg); err != nil {
		return err
	}
	return r.init.Initialize(ctx, mg)
}

// absences remembers, by UID, the resource version of each resource whose
// external resource the last observation found absent.
type absences struct {
	m sync.Map // types.UID -> resourceVersion string
}

// record notes the result of an observation of o.
func (a *absences) record(o client.Object, exists bool) {
	if exists || meta.WasDeleted(o) {
		a.m.Delete(o.GetUID())
		return
	}
	a.m.Store(o.GetUID(), o.GetResourceVersion())
}

// take reports, once, whether the last observation of o found its external
// resource absent, and o has not been written since.
func (a *absences) take(o client.Object) bool {
	rv, ok := a.m.LoadAndDelete(o.GetUID())
	return ok && rv == o.GetResourceVersion()
}

// forget drops what is known about the resource with the supplied UID.
func (a *absences) forget(uid types.UID) { a.m.Delete(uid) }

// observingConnector connects external clients whose observations are
// recorded in absent.
type observingConnector[T resource.Managed] struct {
	managed.TypedExternalConnector[T]
	absent *absences
}

func (c *observingConnector[T]) Connect(ctx context.Context, mg T) (managed.TypedExternalClient[T], error) {
	ec, err := c.TypedExternalConnector.Connect(ctx, mg)
	if err != nil {
		return nil, err
	}
	return &observingClient[T]{TypedExternalClient: ec, absent: c.absent}, nil
}

type observingClient[T resource.Managed] struct {
	managed.TypedExternalClient[T]
	absent *absences
}

func (c *observingClient[T]) Observe(ctx context.Context, mg T) (managed.ExternalObservation, error) {
	o, err := c.TypedExternalClient.Observe(ctx, mg)
	if err != nil {
		c.absent.forget(mg.GetUID())
		return o, err
	}
	c.absent.record(mg, o.ResourceExists)
	return o, nil
}

// deferredFinalizer adds the managed resource finalizer without writing it
// when the reconcile that adds it found no external resource (recorded in
// absent): there is nothing to protect yet, and the create that may follow
// persists it. Otherwise it adds it with the wrapped finalizer, which also
// removes it.
type deferredFinalizer struct {
	resource.Finalizer
	absent *absences
}

func (f *deferredFinalizer) AddFinalizer(ctx context.Context, o resource.Object) error {
	if f.absent.take(o) {
		meta.AddFinalizer(o, managed.FinalizerName)
		return nil
	}
	return f.Finalizer.AddFinalizer(ctx, o)
}

// succeededUnwritten updates critical annotations with the wrapped updater,
// except after a successful create: the external-create-succeeded annotation
// alone is not worth a write when external names are deterministic (see
// above). Create must then not have changed the resource's metadata: this
// provider's never do (the external name is set before the create).
type succeededUnwritten struct {
	managed.CriticalAnnotationUpdater
}

func (u succeededUnwritten) UpdateCriticalAnnotations(ctx context.Context, o client.Object) error {
	if createSucceeded(o) {
		return nil
	}
	return u.CriticalAnnotationUpdater.UpdateCriticalAnnotations(ctx, o)
}

// createSucceeded reports whether o's latest create marker is
// external-create-succeeded: the reconciler has just recorded a successful
// create.
func createSucceeded(o client.Object) bool {
	ok := meta.GetExternalCreateSucceeded(o)
	return !ok.IsZero() && !ok.Before(meta.GetExternalCreatePending(o)) && !ok.Before(meta.GetExternalCreateFailed(o))
}

// statusField returns the Status field of o, a pointer to a struct such as
// every managed resource type; false for any other object.
func statusField(o client.Object) (reflect.Value, bool) {
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName("Status")
	return f, f.IsValid()
}
