package mrsetup

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ratelimit"
)

// The stock path: what crossplane/provider-template's Setup builds for a
// kind, in build's three stages. Each stage fills in parts; the layers of
// order (layers.go) then replace or wrap what it filled in, and the next
// stage builds on the result. With no layer on, these stages are the whole
// assembly.

// parts are the pieces of one kind's reconciler while build assembles them.
type parts[T resource.Managed] struct {
	// What build was given.
	mgr        ctrl.Manager
	o          controller.Options
	d          Deps
	gvk        schema.GroupVersionKind
	newList    func() resource.ManagedList
	name, kind string
	log        logging.Logger

	// Stage 1, the client and the event recorder.
	//
	// kube is every read and write of the managed reconciler and its
	// pieces (WithClient).
	kube client.Client
	// secrets is where the connector reads connection Secrets.
	secrets client.Reader
	// record emits the reconciler's and the connector's events.
	record event.Recorder

	// Stage 2, the managed reconciler's pieces.
	limiter     *ratelimit.Limiter
	connector   managed.TypedExternalConnector[T]
	initializer managed.Initializer
	resolver    managed.ReferenceResolver
	finalizer   resource.Finalizer
	annotations managed.CriticalAnnotationUpdater
	// stateMetrics, when set, records the managed resource state metrics.
	stateMetrics manager.Runnable

	// reconciler is crossplane-runtime's managed reconciler, made of the
	// pieces above.
	reconciler *managed.Reconciler

	// Stage 3, the watch and the handler.
	//
	// observers see every watch event of the kind before the predicates
	// below, and filter nothing.
	observers []predicate.Predicate
	// annotationChanged is the watch's annotation predicate; generation
	// and label changes are the other two.
	annotationChanged predicate.Predicate
	// inner is the reconciler; limited, the reconciler behind the global
	// rate limit; handler, what the controller calls.
	inner, limited, handler reconcile.Reconciler
	options                 ctrlcontroller.Options

	// What layers share between their hooks (layers.go): the write
	// recorder of layers 2 and 7, the cache observer they learn the cache
	// from, and what each of them remembers.
	writes *writeRecorder
	cache  *cacheObserver
	fresh  *freshness
	status *statusMemo
}

func newParts[T resource.Managed](mgr ctrl.Manager, o controller.Options, d Deps, gvk schema.GroupVersionKind, newList func() resource.ManagedList) *parts[T] {
	kind := gvk.GroupKind().String()
	name := managed.ControllerName(kind)
	return &parts[T]{mgr: mgr, o: o, d: d, gvk: gvk, newList: newList, name: name, kind: kind, log: o.Logger.WithValues("controller", name)}
}

// clients is stage 1: the manager's client and an API event recorder of
// the manager's.
func (p *parts[T]) clients() {
	p.kube = p.mgr.GetClient()
	p.secrets = p.kube
	p.record = event.NewAPIRecorder(p.mgr.GetEventRecorderFor(p.name))
}

// pieces is stage 2: the kind's connector and crossplane-runtime's default
// initializer, reference resolver, finalizer and critical annotation
// updater, on the client of stage 1 (they take it from the manager, which
// WithClient gives them), and the state metrics recorder when enabled.
//
// Not layers but choices of behaviour: the deterministic default name
// (names), references confined to the namespace (LocalReferences), new
// resources that wait for what their references select (pending.go), a
// work queue limiter that honours the Widget API's Retry-After (ratelimit),
// the change feed told to forget a resource whose finalizer is removed, and
// an orphaned external resource released before the finalizer goes.
func (p *parts[T]) pieces(connect func(Env) managed.TypedExternalConnector[T]) {
	p.limiter = ratelimit.New(ratelimiter.NewController())
	p.connector = connect(Env{Kind: p.kind, Limiter: p.limiter, Record: p.record, Secrets: p.secrets})
	// The stock initializer (managed.NameAsExternalName) saves the name it
	// sets; so does this one, but the name is the deterministic default.
	p.initializer = savingInitializer{init: names.NewInitializer(), kube: p.kube}
	p.resolver = LocalReferences(managed.NewAPISimpleReferenceResolver(p.kube))
	// Not a layer but behaviour (pending.go): a new resource waits quietly
	// for what its references select to be created.
	if p.d.pendingGrace > 0 {
		p.resolver = pendingReferences{next: p.resolver, grace: p.d.pendingGrace, now: p.d.Clock()}
	}
	p.finalizer = resource.NewAPIFinalizer(p.kube, managed.FinalizerName)
	// Not a layer but behaviour: once its finalizer is removed the
	// resource is gone, and the change feed stops following its widget.
	if feed := p.d.Feed; feed != nil {
		p.finalizer = &forgettingFinalizer{Finalizer: p.finalizer, forget: func(key client.ObjectKey) { feed.Forget(p.kind, key) }}
	}
	// Not a layer but behaviour (orphan.go): an orphaned external resource
	// is released before the finalizer goes. Whether the kind can release
	// is its own connector's, before any layer wraps it.
	if r, ok := p.connector.(Releaser[T]); ok {
		p.finalizer = &releasingFinalizer[T]{Finalizer: p.finalizer, release: r.Release, policies: p.managementPolicies()}
	}
	p.annotations = managed.NewRetryingCriticalAnnotationUpdater(p.kube)
	if p.o.MetricOptions != nil && p.o.MetricOptions.MRStateMetrics != nil {
		p.stateMetrics = statemetrics.NewMRStateRecorder(p.mgr.GetClient(), p.log, p.o.MetricOptions.MRStateMetrics, p.newList(), p.o.MetricOptions.PollStateMetricInterval)
	}
}

// managementPolicies reports whether management policies are enabled.
func (p *parts[T]) managementPolicies() bool {
	return p.o.Features != nil && p.o.Features.Enabled(feature.EnableBetaManagementPolicies)
}

// newReconciler makes the managed reconciler of the pieces of stage 2, on
// the client of stage 1, and adds the state metrics recorder to the
// manager.
func (p *parts[T]) newReconciler() error {
	// Not a layer but behaviour: a resource is reconciled again by the
	// time d.wake says (a WidgetKey's next rotation), if that is before
	// its poll. The floor applies twice: crossplane-runtime clamps the
	// annotation to it (WithMinPollInterval), and the hook keeps the
	// jittered wait above it.
	floor := pollFloor(p.d.MinPollInterval, p.o.PollInterval)
	pollHook := PollInterval(p.d.PollJitter, floor)
	if p.d.wake != nil {
		pollHook = wakeUp(pollHook, p.d.wake, p.d.Clock())
	}
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[T](p.connector),
		managed.WithInitializers(p.initializer),
		managed.WithFinalizer(p.finalizer),
		managed.WithCriticalAnnotationUpdater(p.annotations),
		managed.WithReferenceResolver(p.resolver),
		// Names are chosen before creation, so a crash between the API's
		// create and recording the result is safe to retry.
		managed.WithDeterministicExternalName(true),
		// The Widget API is read-after-write consistent: a widget that is
		// not found right after creation really is gone, so there is no
		// need to wait (the default grace period would delay deleting a
		// freshly created widget by 30s).
		managed.WithCreationGracePeriod(0),
		managed.WithLogger(p.log),
		managed.WithRecorder(p.record),
		managed.WithPollInterval(p.o.PollInterval),
		managed.WithMinPollInterval(floor),
		managed.WithPollIntervalHook(pollHook),
	}
	if p.managementPolicies() {
		opts = append(opts, managed.WithManagementPolicies())
	}
	if p.o.ChangeLogOptions != nil {
		// One entry per create, update and delete (--enable-changelogs).
		opts = append(opts, managed.WithChangeLogger(p.o.ChangeLogOptions.ChangeLogger))
	}
	if p.o.MetricOptions != nil {
		opts = append(opts, managed.WithMetricRecorder(p.o.MetricOptions.MRMetrics))
	}
	if p.stateMetrics != nil {
		if err := p.mgr.Add(p.stateMetrics); err != nil {
			return errors.Wrapf(err, "cannot add %s state metrics recorder", p.gvk.Kind)
		}
	}
	p.reconciler = managed.NewReconciler(WithClient(p.mgr, p.kube), resource.ManagedKind(p.gvk), opts...)
	return nil
}

// watch is stage 3: the kind's generation, annotation and label changes
// queue a reconcile; the controller calls the reconciler behind the global
// rate limit, with a work queue limiter that honours Retry-After.
func (p *parts[T]) watch() {
	p.annotationChanged = predicate.AnnotationChangedPredicate{}
	p.inner = errors.WithSilentRequeueOnConflict(p.reconciler)
	p.limited = ratelimiter.NewReconciler(p.name, p.inner, p.o.GlobalRateLimiter)
	p.handler = p.limited
	p.options = p.o.ForControllerRuntime()
	p.options.RateLimiter = p.limiter
}

// stack returns what Setup hands the controller builder.
func (p *parts[T]) stack() *stack {
	changed := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, p.annotationChanged, predicate.LabelChangedPredicate{})
	predicates := append(append([]predicate.Predicate{}, p.observers...), changed)
	return &stack{name: p.name, kind: p.kind, reconciler: p.reconciler, handler: p.handler, predicates: predicates, options: p.options}
}

// forgettingFinalizer tells forget of a resource whose finalizer it removed:
// the resource is gone (TestRuntimeRemovesTheFinalizerLast pins that the
// reconciler calls nothing after).
type forgettingFinalizer struct {
	resource.Finalizer
	forget func(client.ObjectKey)
}

func (f *forgettingFinalizer) RemoveFinalizer(ctx context.Context, o resource.Object) error {
	if err := f.Finalizer.RemoveFinalizer(ctx, o); err != nil {
		return err
	}
	f.forget(client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()})
	return nil
}
