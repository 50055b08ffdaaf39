// Package mrsetup wires a managed resource kind into a controller: the
// crossplane-runtime managed reconciler with this provider's defaults
// (deterministic external names, management policies, metrics, a work queue
// that honours the Widget API's Retry-After) and a change feed source.
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
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// PollJitter spreads polls by up to this much either way.
	PollJitter time.Duration
	// Recorders, when set, makes the controllers' event recorders (see
	// EventRecorders); the manager's otherwise.
	Recorders RecorderProvider
	// Now, when set, tells the time that schedules (key rotation) are kept
	// by; time.Now otherwise. Tests set it to move time forward.
	Now func() time.Time
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
	wake func(resource.Managed) time.Time
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
		return min(d, max(t.Sub(now()), minWakeUp))
	}
}

// TransitionPoll is the longest a resource that is not Ready waits for its
// next poll. A widget being provisioned or resized becomes Ready by itself;
// the change feed usually says so at once, but when the feed is off or down
// the resource would otherwise show Ready=False for a whole poll interval.
const TransitionPoll = 10 * time.Second

// PollInterval returns a poll interval hook: a resource that is Ready (or
// being deleted) waits the poll interval, one that is not waits at most
// TransitionPoll; either is spread by up to jitter either way.
func PollInterval(jitter time.Duration) func(mg resource.Managed, pollInterval time.Duration) time.Duration {
	return func(mg resource.Managed, pollInterval time.Duration) time.Duration {
		j := jitter
		if mg.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue && !meta.WasDeleted(mg) {
			pollInterval = min(pollInterval, TransitionPoll)
			j = min(j, pollInterval/10)
		}
		return pollInterval + time.Duration((rand.Float64()-0.5)*2*float64(j)) //nolint:gosec // No need for secure randomness.
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

// Setup adds a controller for managed resources of kind gvk, Go type T.
// newList must return an empty list of that kind.
func Setup[T resource.Managed](mgr ctrl.Manager, o controller.Options, d Deps, gvk schema.GroupVersionKind,
	newObj func() T, newList func() resource.ManagedList, connect func(Env) managed.TypedExternalConnector[T], opts ...Option) error {
	var so options
	for _, fn := range opts {
		fn(&so)
	}
	pollHook := PollInterval(d.PollJitter)
	if so.wake != nil {
		pollHook = wakeUp(pollHook, so.wake, d.Clock())
	}
	name := managed.ControllerName(gvk.GroupKind().String())
	limiter := ratelimit.New(ratelimiter.NewController())
	var recorders RecorderProvider = mgr
	if d.Recorders != nil {
		recorders = d.Recorders
	}
	record := withoutGenericUpdates{event.NewAPIRecorder(recorders.GetEventRecorderFor(name))}
	// See fresh.go: the reconciler's writes are recorded, so that it does
	// not start again from a cache that has not seen them.
	fresh, status := newFreshness(), newStatusMemo()
	// See secrets.go: connection Secrets read again soon are read from memory.
	secrets := newSecretMemo(mgr.GetClient(), secretMemoTTL(o.PollInterval))
	kube := writeRecorder{Client: secrets, fresh: fresh, status: status, isKind: func(o client.Object) bool { _, ok := o.(T); return ok }}
	if d.Metrics != nil {
		fresh.observe = func(outcome string) { d.Metrics.CacheWaits.WithLabelValues(gvk.GroupKind().String(), outcome).Inc() }
		kube.skipped = d.Metrics.UnchangedStatus.WithLabelValues(gvk.GroupKind().String()).Inc
		secrets.saved = d.Metrics.SecretReadsSaved.WithLabelValues(gvk.GroupKind().String()).Inc
	}

	absent := &absences{}
	kind := gvk.GroupKind().String()
	var forget func(types.NamespacedName)
	if d.Feed != nil {
		forget = func(key types.NamespacedName) { d.Feed.Forget(kind, key) }
	}
	ropts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[T](&observingConnector[T]{
			TypedExternalConnector: connect(Env{Kind: kind, Limiter: limiter, Record: record, Secrets: secrets}),
			absent:                 absent,
		}),
		managed.WithInitializers(names.NewInitializer()),
		// See writes.go: three writes fewer for every new resource.
		managed.WithFinalizer(&deferredFinalizer{Finalizer: resource.NewAPIFinalizer(kube, managed.FinalizerName), absent: absent, forget: forget}),
		managed.WithCriticalAnnotationUpdater(succeededUnwritten{statusKeepingUpdater{managed.NewRetryingCriticalAnnotationUpdater(kube)}}),
		managed.WithReferenceResolver(reinitializing{next: LocalReferences(managed.NewAPISimpleReferenceResolver(kube)), init: names.NewInitializer()}),
		// Names are chosen before creation, so a crash between the API's
		// create and recording the result is safe to retry.
		managed.WithDeterministicExternalName(true),
		// The Widget API is read-after-write consistent: a widget that is
		// not found right after creation really is gone, so there is no
		// need to wait (the default grace period would delay deleting a
		// freshly created widget by 30s).
		managed.WithCreationGracePeriod(0),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithRecorder(record),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(pollHook),
	}
	if o.Features != nil && o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		ropts = append(ropts, managed.WithManagementPolicies())
	}
	if o.MetricOptions != nil {
		ropts = append(ropts, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
		if o.MetricOptions.MRStateMetrics != nil {
			sr := newStateRecorder(mgr.GetCache(), gvk, newList, o.MetricOptions.MRStateMetrics, o.MetricOptions.PollStateMetricInterval, o.Logger.WithValues("controller", name))
			if err := mgr.Add(sr); err != nil {
				return errors.Wrapf(err, "cannot add %s state metrics recorder", gvk.Kind)
			}
		}
	}
	r := managed.NewReconciler(WithClient(mgr, kube), resource.ManagedKind(gvk), ropts...)

	copts := o.ForControllerRuntime()
	copts.RateLimiter = limiter
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(copts).
		// Status-only updates, and the annotations the reconciler writes
		// while creating, are our own and need no other reconcile.
		For(newObj(), builder.WithPredicates(cacheObserver{fresh: fresh, status: status}, predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			ForeignAnnotationChanged{},
			predicate.LabelChangedPredicate{})))
	inner := errors.WithSilentRequeueOnConflict(r)
	limited := ratelimiter.NewReconciler(name, inner, o.GlobalRateLimiter)
	if d.Feed == nil {
		return b.Complete(freshGate{fresh: fresh, next: limited})
	}
	return b.WatchesRawSource(d.Feed.Source(kind)).Complete(freshGate{fresh: fresh, next: &driftFirst{kind: kind, feed: d.Feed, direct: inner, limited: limited}})
}

// withoutGenericUpdates drops crossplane-runtime's event after every
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

// driftFirst applies the global reconcile rate limit to every request except
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
