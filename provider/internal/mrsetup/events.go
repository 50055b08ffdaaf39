package mrsetup

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventCacheSize is how many objects' recent events the managed resource
// controllers' event correlator remembers (client-go's default is 4,096).
// The correlator merges an object's repeated events into one with a count
// and rate limits an object that sends many; it needs to remember only the
// objects that sent events lately, and its caches took 6 MB of the
// provider's heap at 10,000 Widgets with the default.
const EventCacheSize = 1024

// A RecorderProvider makes event recorders: a controller manager or
// EventRecorders.
type RecorderProvider interface {
	GetEventRecorderFor(name string) record.EventRecorder
}

// EventRecorders is layer 10, ownEventBroadcaster (see the package
// comment): it hands out the event recorders of the managed resource
// controllers. They share one broadcaster, which is the provider's own and
// not the controller manager's: the manager's broadcaster cannot be sized
// (only replaced, and a replacement is shared with leader election, which
// starts a second sink on it: every event was sent twice). The manager's
// broadcaster still sends leader election's events.
type EventRecorders struct {
	b      record.EventBroadcaster
	scheme *runtime.Scheme
}

// NewEventRecorders starts a broadcaster that sends events with events and
// logs them at debug level. Add the result to the manager: it stops the
// broadcaster when the manager stops.
func NewEventRecorders(events typedcorev1.EventsGetter, s *runtime.Scheme, log logging.Logger) *EventRecorders {
	b := record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: EventCacheSize})
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.Events("")})
	b.StartEventWatcher(func(e *corev1.Event) {
		log.Debug(e.Message, "type", e.Type, "object", e.InvolvedObject, "reason", e.Reason)
	})
	return &EventRecorders{b: b, scheme: s}
}

// GetEventRecorderFor returns a recorder whose events come from name.
func (r *EventRecorders) GetEventRecorderFor(name string) record.EventRecorder {
	return r.b.NewRecorder(r.scheme, corev1.EventSource{Component: name})
}

// NeedLeaderElection is false: the broadcaster must stop on every replica.
func (r *EventRecorders) NeedLeaderElection() bool { return false }

// Start waits until ctx is done, then stops the broadcaster after sending
// the events already recorded.
func (r *EventRecorders) Start(ctx context.Context) error {
	<-ctx.Done()
	r.b.Shutdown()
	return nil
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
