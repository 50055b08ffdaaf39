package mrsetup

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ratelimit"
)

// A FeedSource turns Widget API changes into reconcile requests for
// resources of a kind.
type FeedSource interface {
	Source(kind string) source.Source
	// Changed reports, once per request, whether the feed queued the
	// resource key of kind because its widget changed.
	Changed(kind string, key types.NamespacedName) bool
	// Forget stops following the widget of the resource key of kind,
	// which is gone.
	Forget(kind string, key types.NamespacedName)
}

// Deps are shared by every managed resource controller.
type Deps struct {
	Sessions *clients.Sessions
	Metrics  *metrics.Metrics
	// Feed, when set, requeues resources as soon as the change feed reports
	// a change to their widget.
	Feed FeedSource
	// PollJitter spreads polls by up to this much either way, and by at
	// most a tenth of a resource's own interval.
	PollJitter time.Duration
	// MinPollInterval is the shortest a resource waits for its next poll,
	// whatever its crossplane.io/poll-interval annotation asks:
	// DefaultMinPollInterval when zero, and at most the controller's poll
	// interval (see pollFloor).
	MinPollInterval time.Duration
	// Recorders, when set, makes the controllers' event recorders (see
	// EventRecorders) while the layer ownEventBroadcaster is on; the
	// manager's otherwise.
	Recorders RecorderProvider
	// Now, when set, tells the time that schedules (key rotation) are kept
	// by; time.Now otherwise. Tests set it to move time forward.
	Now func() time.Time

	// wake is Setup's WithWakeUp.
	wake func(resource.Managed) time.Time
	// pendingGrace is Setup's WithPendingReferences.
	pendingGrace time.Duration
}

// Clock returns d.Now, or time.Now when it is not set.
func (d Deps) Clock() func() time.Time {
	if d.Now != nil {
		return d.Now
	}
	return time.Now
}

// An Option changes how Setup wires a kind.
type Option func(*options)

type options struct {
	wake         func(resource.Managed) time.Time
	pendingGrace time.Duration
	watches      []watch
}

// WithWakeUp has a resource reconciled again by the time wake returns, when
// that is before its next poll: a WidgetKey's next rotation is not put off
// by up to a poll interval. A zero time schedules nothing.
func WithWakeUp(wake func(resource.Managed) time.Time) Option {
	return func(o *options) { o.wake = wake }
}

// minWakeUp is the soonest a wake-up requeues a resource.
const minWakeUp = time.Second

// wakeUp returns a poll interval hook that waits what hook says, or until
// wake's time by now's clock when that is sooner (at least minWakeUp).
func wakeUp(hook func(resource.Managed, time.Duration) time.Duration, wake func(resource.Managed) time.Time, now func() time.Time) func(resource.Managed, time.Duration) time.Duration {
	return func(mg resource.Managed, poll time.Duration) time.Duration {
		d := hook(mg, poll)
		t := wake(mg)
		if t.IsZero() {
			return d
		}
		w := max(t.Sub(now()), minWakeUp)
		// A wait of zero or less requeues nothing: the wake-up must not
		// depend on the hook keeping its contract.
		if d <= 0 {
			return w
		}
		return min(d, w)
	}
}

// TransitionPoll is the longest a resource that is not Ready waits for its
// next poll. A widget being provisioned or resized becomes Ready by itself;
// the change feed usually says so at once, but when the feed is off or down
// the resource would otherwise show Ready=False for a whole poll interval.
const TransitionPoll = 10 * time.Second

// DefaultMinPollInterval is the shortest poll a resource's
// crossplane.io/poll-interval annotation gets when Deps.MinPollInterval is
// not set: TransitionPoll, so that an annotation never makes the provider
// poll a resource more often than it would by itself. Without a floor, ten
// resources annotated 1ms that are not Ready take the whole global
// reconcile rate (see TestAnnotatedPollLoad).
const DefaultMinPollInterval = TransitionPoll

// pollFloor returns the shortest poll of a controller whose poll interval is
// poll: floor, or DefaultMinPollInterval when floor is zero or less. It is
// never more than a positive poll: the floor bounds what an annotation asks
// for, and an operator's own --poll-interval below it stands.
func pollFloor(floor, poll time.Duration) time.Duration {
	if floor <= 0 {
		floor = DefaultMinPollInterval
	}
	if poll > 0 {
		floor = min(floor, poll)
	}
	return floor
}

// PollInterval returns a poll interval hook: a resource that is Ready (or
// being deleted) waits the poll interval, one that is not waits at most
// TransitionPoll, and neither waits less than floor. The wait is spread by
// up to jitter either way, by at most a tenth of itself, and never below
// floor: a jitter longer than the interval would otherwise give a negative
// wait, which requeues nothing, and the resource would never be polled
// again.
func PollInterval(jitter, floor time.Duration) func(mg resource.Managed, pollInterval time.Duration) time.Duration {
	floor = max(floor, 0)
	return func(mg resource.Managed, pollInterval time.Duration) time.Duration {
		if mg.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue && !meta.WasDeleted(mg) {
			pollInterval = min(pollInterval, TransitionPoll)
		}
		pollInterval = max(pollInterval, floor)
		j := max(min(jitter, pollInterval/10), 0)
		lo, hi := max(pollInterval-j, floor), pollInterval+j
		return lo + time.Duration(rand.Float64()*float64(hi-lo)) //nolint:gosec // No need for secure randomness.
	}
}

// Env is what Setup hands to the connector it builds.
type Env struct {
	// Kind names the resource kind, for the change feed.
	Kind string
	// Limiter delays a request's retry (e.g. by a Retry-After).
	Limiter *ratelimit.Limiter
	// Record emits events about managed resources.
	Record event.Recorder
	// Secrets reads connection Secrets from the API server, or from the
	// memory of the controller's own reads and writes of them in the last
	// half poll interval (see secrets.go).
	Secrets client.Reader
}

// Setup adds a controller for managed resources of kind gvk, Go type T,
// with every layer of this provider switched on (see lean in layers.go).
// newList must return an empty list of that kind.
func Setup[T resource.Managed](mgr ctrl.Manager, o controller.Options, d Deps, gvk schema.GroupVersionKind,
	newObj func() T, newList func() resource.ManagedList, connect func(Env) managed.TypedExternalConnector[T], opts ...Option) error {
	var so options
	for _, fn := range opts {
		fn(&so)
	}
	d.wake = so.wake
	d.pendingGrace = so.pendingGrace
	s, err := build(mgr, o, d, gvk, newList, connect, lean)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(s.name).
		WithOptions(s.options).
		For(newObj(), builder.WithPredicates(s.predicates...))
	if d.Feed != nil {
		b = b.WatchesRawSource(d.Feed.Source(s.kind))
	}
	for _, w := range so.watches {
		b = b.Watches(w.obj, w.handler, builder.WithPredicates(w.preds...))
	}
	return b.Complete(s.handler)
}

// A stack is crossplane-runtime's managed reconciler for one kind with the
// layers switched on around and inside it.
type stack struct {
	name, kind string
	// reconciler is crossplane-runtime's managed reconciler.
	reconciler *managed.Reconciler
	// handler is what the controller calls: reconciler, behind the
	// global rate limit, behind the layers that wrap it.
	handler reconcile.Reconciler
	// predicates filter the watch events of the kind.
	predicates []predicate.Predicate
	// options are the controller's.
	options ctrlcontroller.Options
}

// build assembles the reconciler for managed resources of kind gvk, Go type
// T, in three parts: the client and event recorder, the managed
// reconciler's pieces, and the watch and handler around it. Each part first
// builds the stock pieces, as crossplane/provider-template does, then
// switches on the layers of l that replace or wrap them, each under a
// comment with its number and name from the package comment. With the
// zero layers it is the stock path.
func build[T resource.Managed](mgr ctrl.Manager, o controller.Options, d Deps, gvk schema.GroupVersionKind,
	newList func() resource.ManagedList, connect func(Env) managed.TypedExternalConnector[T], l layers) (*stack, error) {
	kind := gvk.GroupKind().String()
	name := managed.ControllerName(kind)
	log := o.Logger.WithValues("controller", name)

	// The client and the event recorder. Stock: the manager's.
	kube := mgr.GetClient()
	var recorders RecorderProvider = mgr
	// Layer 10, ownEventBroadcaster (events.go).
	if l.ownEventBroadcaster && d.Recorders != nil {
		recorders = d.Recorders
	}
	var record event.Recorder = event.NewAPIRecorder(recorders.GetEventRecorderFor(name))
	// Layer 9, oneEventPerUpdate (this file).
	if l.oneEventPerUpdate {
		record = withoutGenericUpdates{record}
	}
	// Layer 8, secretMemo (secrets.go). The connector reads Secrets
	// through it too.
	secrets := kube
	if l.secretMemo {
		memo := newSecretMemo(kube, secretMemoTTL(o.PollInterval))
		if d.Metrics != nil {
			memo.saved = d.Metrics.SecretReadsSaved.WithLabelValues(kind).Inc
		}
		kube, secrets = memo, memo
	}
	// Layers 7, unchangedStatus (status.go), and 2, freshGate (fresh.go):
	// a client that records the controller's writes of its kind.
	var fresh *freshness
	var status *statusMemo
	if l.unchangedStatus || l.freshGate {
		w := writeRecorder{Client: kube, isKind: func(o client.Object) bool { _, ok := o.(T); return ok }}
		if l.unchangedStatus {
			status = newStatusMemo()
			w.status = status
			if d.Metrics != nil {
				w.skipped = d.Metrics.UnchangedStatus.WithLabelValues(kind).Inc
			}
		}
		if l.freshGate {
			fresh = newFreshness()
			w.fresh = fresh
			if d.Metrics != nil {
				fresh.observe = func(outcome string) { d.Metrics.CacheWaits.WithLabelValues(kind, outcome).Inc() }
			}
		}
		kube = w
	}

	// The managed reconciler's pieces. Stock: crossplane-runtime's
	// defaults, on the client above (they take it from the manager, which
	// WithClient gives them). Not layers but choices of behaviour: the
	// deterministic default name (names), references confined to the
	// namespace (LocalReferences), a work queue limiter that honours the
	// Widget API's Retry-After (ratelimit), and the change feed told to
	// forget a resource whose finalizer is removed.
	limiter := ratelimit.New(ratelimiter.NewController())
	connector := connect(Env{Kind: kind, Limiter: limiter, Record: record, Secrets: secrets})
	// The kind's own connector, before any layer wraps it: whether it can
	// release an orphaned external resource is its own.
	kindConnector := connector
	var initializer managed.Initializer = savingInitializer{init: names.NewInitializer(), kube: kube}
	resolver := LocalReferences(managed.NewAPISimpleReferenceResolver(kube))
	// Not a layer but behaviour (pending.go): a new resource waits quietly
	// for what its references select to be created.
	if d.pendingGrace > 0 {
		resolver = pendingReferences{next: resolver, grace: d.pendingGrace, now: d.Clock()}
	}
	finalizer := resource.NewAPIFinalizer(kube, managed.FinalizerName)
	var annotations managed.CriticalAnnotationUpdater = managed.NewRetryingCriticalAnnotationUpdater(kube)
	var forget func(types.NamespacedName)
	if d.Feed != nil {
		forget = func(key types.NamespacedName) { d.Feed.Forget(kind, key) }
	}
	// Layer 4, defaultNameUnwritten (writes.go).
	if l.defaultNameUnwritten {
		initializer = names.NewInitializer()
		resolver = reinitializing{next: resolver, init: names.NewInitializer()}
	}
	// Layer 5, deferredFinalizer (writes.go): Observe records absences.
	var absent *absences
	if l.deferredFinalizer {
		absent = &absences{}
		connector = &observingConnector[T]{TypedExternalConnector: connector, absent: absent}
	}
	// Layer 6, succeededUnwritten (writes.go).
	if l.succeededUnwritten {
		annotations = succeededUnwritten{annotations}
	}
	policies := o.Features != nil && o.Features.Enabled(feature.EnableBetaManagementPolicies)
	var fin resource.Finalizer = &deferredFinalizer{Finalizer: finalizer, absent: absent, forget: forget}
	// Not a layer but behaviour (orphan.go): an orphaned external resource
	// is released before the finalizer goes.
	if r, ok := kindConnector.(Releaser[T]); ok {
		fin = &releasingFinalizer[T]{Finalizer: fin, release: r.Release, policies: policies}
	}
	// Not a layer but behaviour: a resource is reconciled again by the time
	// d.wake says (a WidgetKey's next rotation), if that is before its poll.
	// The floor applies twice: crossplane-runtime clamps the annotation to
	// it (WithMinPollInterval), and the hook keeps the jittered wait above
	// it.
	floor := pollFloor(d.MinPollInterval, o.PollInterval)
	pollHook := PollInterval(d.PollJitter, floor)
	if d.wake != nil {
		pollHook = wakeUp(pollHook, d.wake, d.Clock())
	}
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[T](connector),
		managed.WithInitializers(initializer),
		managed.WithFinalizer(fin),
		managed.WithCriticalAnnotationUpdater(annotations),
		managed.WithReferenceResolver(resolver),
		// Names are chosen before creation, so a crash between the API's
		// create and recording the result is safe to retry.
		managed.WithDeterministicExternalName(true),
		// The Widget API is read-after-write consistent: a widget that is
		// not found right after creation really is gone, so there is no
		// need to wait (the default grace period would delay deleting a
		// freshly created widget by 30s).
		managed.WithCreationGracePeriod(0),
		managed.WithLogger(log),
		managed.WithRecorder(record),
		managed.WithPollInterval(o.PollInterval),
		managed.WithMinPollInterval(floor),
		managed.WithPollIntervalHook(pollHook),
	}
	if policies {
		opts = append(opts, managed.WithManagementPolicies())
	}
	if o.ChangeLogOptions != nil {
		// One entry per create, update and delete (--enable-changelogs).
		opts = append(opts, managed.WithChangeLogger(o.ChangeLogOptions.ChangeLogger))
	}
	if o.MetricOptions != nil {
		opts = append(opts, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
		if o.MetricOptions.MRStateMetrics != nil {
			var sr manager.Runnable = statemetrics.NewMRStateRecorder(mgr.GetClient(), log, o.MetricOptions.MRStateMetrics, newList(), o.MetricOptions.PollStateMetricInterval)
			// Layer 11, copyFreeStateMetrics (state.go).
			if l.copyFreeStateMetrics {
				sr = newStateRecorder(mgr.GetCache(), gvk, newList, o.MetricOptions.MRStateMetrics, o.MetricOptions.PollStateMetricInterval, log)
			}
			if err := mgr.Add(sr); err != nil {
				return nil, errors.Wrapf(err, "cannot add %s state metrics recorder", gvk.Kind)
			}
		}
	}
	r := managed.NewReconciler(WithClient(mgr, kube), resource.ManagedKind(gvk), opts...)

	// The watch and the handler. Stock: generation, annotation and label
	// changes; the reconciler behind the global rate limit.
	annotationChanged := predicate.Predicate(predicate.AnnotationChangedPredicate{})
	// Layer 1, ownAnnotationsIgnored (predicate.go).
	if l.ownAnnotationsIgnored {
		annotationChanged = ForeignAnnotationChanged{}
	}
	predicates := []predicate.Predicate{predicate.Or[client.Object](
		predicate.GenerationChangedPredicate{}, annotationChanged, predicate.LabelChangedPredicate{})}
	if fresh != nil || status != nil {
		// Layers 2 and 7 learn what the cache holds from the watch.
		predicates = append([]predicate.Predicate{cacheObserver{fresh: fresh, status: status}}, predicates...)
	}
	inner := errors.WithSilentRequeueOnConflict(r)
	limited := ratelimiter.NewReconciler(name, inner, o.GlobalRateLimiter)
	handler := reconcile.Reconciler(limited)
	// Layer 3, driftFirst (this file).
	if l.driftFirst && d.Feed != nil {
		handler = &driftFirst{kind: kind, feed: d.Feed, direct: inner, limited: limited}
	}
	// Layer 2, freshGate (fresh.go).
	if l.freshGate {
		handler = freshGate{fresh: fresh, next: handler}
	}
	copts := o.ForControllerRuntime()
	copts.RateLimiter = limiter
	return &stack{name: name, kind: kind, reconciler: r, handler: handler, predicates: predicates, options: copts}, nil
}

// withoutGenericUpdates is layer 9, oneEventPerUpdate (see the package
// comment; TestRuntimeRecordsUpdatesThroughWithAnnotations pins what it
// assumes). It drops crossplane-runtime's event after every
// successful update of an external resource ("Successfully requested update
// of external resource"): each connector of this provider that updates
// records an event of its own that says why and what changed (drift
// repaired, widget adopted, spec applied, key rotated), and the generic one
// would be a second event write for every drift repair. It is a wrapper, not one of
// event.APIRecorder's filters, because APIRecorder.WithAnnotations, which the
// managed reconciler calls at the start of every reconcile, drops them
// (crossplane-runtime v2.4.0).
type withoutGenericUpdates struct{ event.Recorder }

func (r withoutGenericUpdates) Event(o runtime.Object, e event.Event) {
	if e.Type == event.TypeNormal && e.Reason == reasonRuntimeUpdated {
		return
	}
	r.Recorder.Event(o, e)
}

func (r withoutGenericUpdates) WithAnnotations(keysAndValues ...string) event.Recorder {
	return withoutGenericUpdates{r.Recorder.WithAnnotations(keysAndValues...)}
}

// reasonRuntimeUpdated is crossplane-runtime's (unexported) reason for it.
const reasonRuntimeUpdated event.Reason = "UpdatedExternalResource"

// driftFirst is layer 3 (see the package comment). It applies the global
// reconcile rate limit to every request except
// those the change feed made because a resource's widget changed: drift is
// repaired at once instead of queueing behind the token bucket with polls
// and new resources. Those requests are still bounded by the controller's
// concurrent reconciles, the feed's dedup of a resource's own writes, and
// the Widget API's own limits (429s and the per-host connection cap).
type driftFirst struct {
	kind    string
	feed    FeedSource
	direct  reconcile.Reconciler
	limited reconcile.Reconciler
}

func (d *driftFirst) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if d.feed.Changed(d.kind, req.NamespacedName) {
		return d.direct.Reconcile(ctx, req)
	}
	return d.limited.Reconcile(ctx, req)
}
