package mrsetup

import (
	"math/rand/v2"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
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
	// ControlPlane names the control plane this provider runs in: the
	// value of ownership.ControlPlaneLabel on what it creates. Empty, the
	// provider names none and tells no control plane from another.
	ControlPlane string

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
// T, in three stages: the client and event recorder, the managed
// reconciler's pieces, and the watch and handler around the reconciler.
// Each stage builds the stock pieces, as crossplane/provider-template does
// (stock.go), then runs the hooks of that stage of the layers l switches on
// (order, in layers.go), which replace or wrap them. With the zero layers it
// is the stock path.
func build[T resource.Managed](mgr ctrl.Manager, o controller.Options, d Deps, gvk schema.GroupVersionKind,
	newList func() resource.ManagedList, connect func(Env) managed.TypedExternalConnector[T], l layers) (*stack, error) {
	on := switchedOn[T](l)
	p := newParts[T](mgr, o, d, gvk, newList)

	p.clients()
	on.run(p, clientsStage)

	p.pieces(connect)
	on.run(p, piecesStage)
	if err := p.newReconciler(); err != nil {
		return nil, err
	}

	p.watch()
	on.run(p, watchStage)
	return p.stack(), nil
}
