package mrsetup

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/provider/internal/names"
)

// layers switches on, one by one, this provider's departures from
// crossplane-runtime's stock managed reconciler that exist to do less work
// (fewer writes, reads, reconciles or bytes). The zero value is the stock
// path; lean, which Setup uses, has every layer on. Each field is one layer
// of order, below, by its name and in its place; docs/reconciler.md gives
// what each one saves, measured, and the contract test that pins what it
// assumes of crossplane-runtime v2.4.0.
type layers struct {
	// ownAnnotationsIgnored: watch events that change only the
	// annotations the reconciler writes while creating do not queue a
	// reconcile (predicate.go).
	ownAnnotationsIgnored bool
	// freshGate: a reconcile whose cache has not seen the controller's own
	// last write of the resource waits for it (fresh.go).
	freshGate bool
	// driftFirst: a reconcile the change feed asked for skips the global
	// reconcile rate limit (driftfirst.go).
	driftFirst bool
	// defaultNameUnwritten: the default external name is saved by the
	// create-pending update, not by an update of its own (writes.go).
	defaultNameUnwritten bool
	// deferredFinalizer: the finalizer of a resource whose external
	// resource does not exist is saved by the create-pending update, not
	// by an update of its own (writes.go).
	deferredFinalizer bool
	// succeededUnwritten: the external-create-succeeded annotation is not
	// written (writes.go).
	succeededUnwritten bool
	// unchangedStatus: a status update that changes nothing is not sent
	// (status.go, client.go).
	unchangedStatus bool
	// secretMemo: a connection Secret read again within half a poll
	// interval is read from memory (secrets.go).
	secretMemo bool
	// oneEventPerUpdate: crossplane-runtime's generic event after an
	// external update is dropped; the connector records its own
	// (events.go).
	oneEventPerUpdate bool
	// ownEventBroadcaster: events go through Deps.Recorders, when set: a
	// broadcaster whose correlator remembers fewer objects (events.go).
	ownEventBroadcaster bool
	// copyFreeStateMetrics: the managed resource state metrics count the
	// cache in place instead of listing a copy of it (state.go).
	copyFreeStateMetrics bool
}

// lean is every layer switched on: the one place where they are.
var lean = layers{
	ownAnnotationsIgnored: true,
	freshGate:             true,
	driftFirst:            true,
	defaultNameUnwritten:  true,
	deferredFinalizer:     true,
	succeededUnwritten:    true,
	unchangedStatus:       true,
	secretMemo:            true,
	oneEventPerUpdate:     true,
	ownEventBroadcaster:   true,
	copyFreeStateMetrics:  true,
}

// A layer is one of this provider's layers as build switches it on: hooks
// into build's stages (stock.go), each of which replaces or wraps pieces
// that the stock stage, and the layers after it, built.
type layer[T resource.Managed] struct {
	// n and name are the layer's number and name in the package comment
	// and docs/reconciler.md.
	n    int
	name string
	// on reports whether the layer is switched on: its field of layers.
	on func(layers) bool
	// clients replaces or wraps the client and the event recorder (stage
	// 1), pieces the managed reconciler's pieces (stage 2), and watch the
	// watch's predicates and the handler (stage 3); nil where the layer
	// changes nothing.
	clients, pieces, watch func(*parts[T])
}

// order is the layers in the order a request meets them. build runs each
// stage's hooks from the last layer to the first, so that a layer a request
// meets sooner wraps those it meets later: the handler is the fresh gate
// around drift first, the client the write recorder around the secret memo,
// the recorder one event per update around the own event broadcaster.
func order[T resource.Managed]() []layer[T] {
	return []layer[T]{{
		n: 1, name: "ownAnnotationsIgnored", on: func(l layers) bool { return l.ownAnnotationsIgnored },
		// predicate.go
		watch: func(p *parts[T]) { p.annotationChanged = ForeignAnnotationChanged{} },
	}, {
		n: 2, name: "freshGate", on: func(l layers) bool { return l.freshGate },
		// fresh.go, client.go: the client records the controller's writes,
		// the watch what the cache holds, and the handler waits for the
		// cache to hold the last write.
		clients: func(p *parts[T]) {
			p.fresh = newFreshness()
			if m := p.d.Metrics; m != nil {
				p.fresh.observe = func(outcome string) { m.CacheWaits.WithLabelValues(p.kind, outcome).Inc() }
			}
			p.recordWrites().fresh = p.fresh
		},
		watch: func(p *parts[T]) {
			p.observeCache().fresh = p.fresh
			p.handler = freshGate{fresh: p.fresh, next: p.handler}
		},
	}, {
		n: 3, name: "driftFirst", on: func(l layers) bool { return l.driftFirst },
		// driftfirst.go
		watch: func(p *parts[T]) {
			if p.d.Feed != nil {
				p.handler = &driftFirst{kind: p.kind, feed: p.d.Feed, direct: p.inner, limited: p.limited}
			}
		},
	}, {
		n: 4, name: "defaultNameUnwritten", on: func(l layers) bool { return l.defaultNameUnwritten },
		// writes.go
		pieces: func(p *parts[T]) {
			p.initializer = names.NewInitializer()
			p.resolver = reinitializing{next: p.resolver, init: names.NewInitializer()}
		},
	}, {
		n: 5, name: "deferredFinalizer", on: func(l layers) bool { return l.deferredFinalizer },
		// writes.go: Observe records absences, AddFinalizer takes them.
		pieces: func(p *parts[T]) {
			absent := &absences{}
			p.connector = &observingConnector[T]{TypedExternalConnector: p.connector, absent: absent}
			p.finalizer = &deferredFinalizer{Finalizer: p.finalizer, absent: absent}
		},
	}, {
		n: 6, name: "succeededUnwritten", on: func(l layers) bool { return l.succeededUnwritten },
		// writes.go
		pieces: func(p *parts[T]) { p.annotations = succeededUnwritten{p.annotations} },
	}, {
		n: 7, name: "unchangedStatus", on: func(l layers) bool { return l.unchangedStatus },
		// status.go, client.go: the client remembers the statuses it reads
		// and writes, and the watch forgets those of deleted resources.
		clients: func(p *parts[T]) {
			p.status = newStatusMemo()
			w := p.recordWrites()
			w.status = p.status
			if m := p.d.Metrics; m != nil {
				w.skipped = m.UnchangedStatus.WithLabelValues(p.kind).Inc
			}
		},
		watch: func(p *parts[T]) { p.observeCache().status = p.status },
	}, {
		n: 8, name: "secretMemo", on: func(l layers) bool { return l.secretMemo },
		// secrets.go: the connector reads Secrets through it too.
		clients: func(p *parts[T]) {
			memo := newSecretMemo(p.kube, secretMemoTTL(p.o.PollInterval))
			if m := p.d.Metrics; m != nil {
				memo.saved = m.SecretReadsSaved.WithLabelValues(p.kind).Inc
			}
			p.kube, p.secrets = memo, memo
		},
	}, {
		n: 9, name: "oneEventPerUpdate", on: func(l layers) bool { return l.oneEventPerUpdate },
		// events.go
		clients: func(p *parts[T]) { p.record = withoutGenericUpdates{p.record} },
	}, {
		n: 10, name: "ownEventBroadcaster", on: func(l layers) bool { return l.ownEventBroadcaster },
		// events.go: the recorder, when Deps.Recorders is set, is one of
		// its recorders instead of the manager's.
		clients: func(p *parts[T]) {
			if p.d.Recorders != nil {
				p.record = event.NewAPIRecorder(p.d.Recorders.GetEventRecorderFor(p.name))
			}
		},
	}, {
		n: 11, name: "copyFreeStateMetrics", on: func(l layers) bool { return l.copyFreeStateMetrics },
		// state.go
		pieces: func(p *parts[T]) {
			if p.stateMetrics != nil {
				p.stateMetrics = newStateRecorder(p.mgr.GetCache(), p.gvk, p.newList, p.o.MetricOptions.MRStateMetrics, p.o.MetricOptions.PollStateMetricInterval, p.log)
			}
		},
	}}
}

// A stage is one of build's three.
type stage int

const (
	clientsStage stage = iota // the client and the event recorder
	piecesStage               // the managed reconciler's pieces
	watchStage                // the watch and the handler
)

// switchedOnLayers are the layers a build switches on, last first: the
// order in which it runs their hooks.
type switchedOnLayers[T resource.Managed] []layer[T]

// switchedOn returns the layers of order that l switches on, last first.
func switchedOn[T resource.Managed](l layers) switchedOnLayers[T] {
	all := order[T]()
	on := make(switchedOnLayers[T], 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].on(l) {
			on = append(on, all[i])
		}
	}
	return on
}

// run runs each layer's hook of stage s, if it has one.
func (on switchedOnLayers[T]) run(p *parts[T], s stage) {
	for _, l := range on {
		hook := [...]func(*parts[T]){clientsStage: l.clients, piecesStage: l.pieces, watchStage: l.watch}[s]
		if hook != nil {
			hook(p)
		}
	}
}

// recordWrites returns the client that records the controller's writes of
// its kind for layers 2 and 7 (client.go), wrapping the client the first
// time.
func (p *parts[T]) recordWrites() *writeRecorder {
	if p.writes == nil {
		p.writes = &writeRecorder{Client: p.kube, isKind: func(o client.Object) bool { _, ok := o.(T); return ok }}
		p.kube = p.writes
	}
	return p.writes
}

// observeCache returns the observer through which layers 2 and 7 learn from
// the watch what the cache holds (fresh.go), adding it the first time.
func (p *parts[T]) observeCache() *cacheObserver {
	if p.cache == nil {
		p.cache = &cacheObserver{}
		p.observers = append(p.observers, p.cache)
	}
	return p.cache
}
