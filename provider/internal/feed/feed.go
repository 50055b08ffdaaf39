// Package feed follows the Widget API's change feed for every connection the
// provider uses and queues the affected managed resources for reconciliation
// at once, so a change made outside Crossplane is repaired in seconds instead
// of at the next poll. Polling remains the safety net: a follower starts from
// the latest change, and anything missed while it was not running is found
// by the next poll.
package feed

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// watcher is a managed resource interested in a widget.
type watcher struct {
	kind string
	key  types.NamespacedName
}

// Manager runs one follower per connection. It is a controller-runtime
// Runnable that needs leader election: only the leader follows.
//
// What a tenant's ProviderConfig can make it do is bounded: at most
// maxFollowers followers in all and maxPerNamespace per namespace
// (connections beyond them rely on polling), followers no resource uses are
// stopped, and the requests the feeds make reach the controllers at most
// at the requeue rate in total, taking turns between tenants (see
// fairQueue).
type Manager struct {
	log     logging.Logger
	metrics *metrics.Metrics
	idle    time.Duration
	wait    time.Duration
	// emptyIdle is how long a follower no resource follows any more is
	// kept (at most idle).
	emptyIdle time.Duration

	maxFollowers, maxPerNamespace int
	queue                         *fairQueue

	mu        sync.Mutex
	ctx       context.Context
	sources   map[string]chan event.GenericEvent
	followers map[string]*follower
	// perNamespace counts the followers of connections from each
	// namespace's ProviderConfigs.
	perNamespace map[string]int
	// connOf is the connection key each watcher follows through.
	connOf map[watcher]string
	// changed are the resources queued because their widget changed and
	// not reconciled since (see Changed).
	changed map[watcher]struct{}
	// recent is told of every change, so it forgets the changed widget.
	recent *clients.RecentWidgets
}

// maxChanged bounds changed: entries are removed as the resources are
// reconciled, so only resources deleted while queued would stay.
const maxChanged = 100000

// follower follows one connection's feed and knows which managed resources
// care about which of its widgets (learned from their reconciles, so it is
// exact per Widget API project and costs O(1) per change).
type follower struct {
	cancel   context.CancelFunc
	lastUsed time.Time
	endpoint string
	// namespace is the connection's (see clients.Connection.Namespace);
	// share is its turn in the fair queue: the namespace, or the
	// connection for a cluster-scoped one.
	namespace, share string
	// watchers are, by widget name, the managed resources that care about
	// it: usually one, so a slice (a map per widget took 900 bytes of heap
	// per widget, 9 MB at 10,000).
	watchers map[string][]watch
	// widgetOf is the widget each watcher follows, so that a resource that
	// names another widget, or is deleted, stops following the old one.
	widgetOf map[watcher]string
	// live is set while the feed's last poll succeeded (see Following).
	live atomic.Bool
}

// watch is a watcher and what it last saw of its widget.
type watch struct {
	watcher
	seen version
}

// find returns the index of w in ws, or -1.
func find(ws []watch, w watcher) int {
	for i := range ws {
		if ws[i].watcher == w {
			return i
		}
	}
	return -1
}

// version is what a watcher last saw of its widget: its generation and
// state. A change feed entry for that version, or an older one, needs no
// reconcile (it is typically the echo of the watcher's own write). The zero
// version is unknown: every change is queued.
type version struct {
	generation int64
	state      widgetapi.State
}

// covers reports whether a watcher that saw v has already seen the widget
// as it was after change ch.
func (v version) covers(ch *widgetapi.Change) bool {
	if v.generation == 0 || ch == nil {
		return false
	}
	switch ch.Type {
	case widgetapi.ChangeWidgetCreated, widgetapi.ChangeWidgetUpdated, widgetapi.ChangeWidgetState:
	default:
		return false // deletions and key changes always matter
	}
	return v.generation > ch.Generation || v.generation == ch.Generation && v.state == ch.State
}

// An Option configures a Manager.
type Option func(*Manager)

// WithIdleTimeout stops a follower whose connection no reconcile has used
// for d (default 15m; set it above the poll interval).
func WithIdleTimeout(d time.Duration) Option { return func(m *Manager) { m.idle = d } }

// WithWait sets the long-poll duration (default 30s).
func WithWait(d time.Duration) Option { return func(m *Manager) { m.wait = d } }

// Defaults of the bounds a Manager keeps (see the options).
const (
	DefaultMaxFollowers    = 256
	DefaultMaxPerNamespace = 8
	DefaultRequeueRate     = 50.0
	// EmptyFollowerIdle is how long a follower that no resource follows
	// any more (they were deleted, or moved to another connection) is
	// kept.
	EmptyFollowerIdle = time.Minute
)

// WithMaxFollowers bounds the followers: at most total in all, and at most
// perNamespace for connections from one namespace's ProviderConfigs (those
// of cluster-scoped configs count only towards total). The resources of a
// connection beyond them are not requeued by its feed: their polls find
// changes. Defaults: DefaultMaxFollowers, DefaultMaxPerNamespace.
func WithMaxFollowers(total, perNamespace int) Option {
	return func(m *Manager) { m.maxFollowers, m.maxPerNamespace = total, perNamespace }
}

// WithRequeueRate bounds the requests all feeds together make, per second
// (with bursts of as many), shared in turns between namespaces (default
// DefaultRequeueRate).
func WithRequeueRate(perSecond float64) Option {
	return func(m *Manager) { m.queue = newFairQueue(perSecond, int(max(perSecond, 1))) }
}

// WithRecentWidgets makes every change the feed reports forget the changed
// widget in r, and a resync (the feed fell behind) every widget of the
// connection.
func WithRecentWidgets(r *clients.RecentWidgets) Option { return func(m *Manager) { m.recent = r } }

// NewManager returns a Manager. Add it to the controller manager so it
// starts.
func NewManager(log logging.Logger, m *metrics.Metrics, opts ...Option) *Manager {
	fm := &Manager{log: log, metrics: m, idle: 15 * time.Minute, wait: 30 * time.Second, emptyIdle: EmptyFollowerIdle,
		maxFollowers: DefaultMaxFollowers, maxPerNamespace: DefaultMaxPerNamespace, queue: newFairQueue(DefaultRequeueRate, int(DefaultRequeueRate)),
		sources: map[string]chan event.GenericEvent{}, followers: map[string]*follower{}, perNamespace: map[string]int{}, connOf: map[watcher]string{}, changed: map[watcher]struct{}{}}
	for _, o := range opts {
		o(fm)
	}
	return fm
}

// Source returns the source the controller of a kind of managed resource
// watches for feed-triggered requests.
func (m *Manager) Source(kind string) source.Source {
	ch := make(chan event.GenericEvent, 1024)
	m.mu.Lock()
	m.sources[kind] = ch
	m.mu.Unlock()
	return source.Channel[client.Object](ch, &handler.EnqueueRequestForObject{})
}

// Changed reports whether the resource key of kind was queued because the
// change feed reported a change to its widget, and forgets it: true once per
// such request. A resync (a follower that fell behind queues every resource
// it follows) does not count: nothing is known to have changed.
func (m *Manager) Changed(kind string, key types.NamespacedName) bool {
	w := watcher{kind: kind, key: key}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.changed[w]
	delete(m.changed, w)
	return ok
}

// NeedLeaderElection is true: only the leader follows feeds.
func (m *Manager) NeedLeaderElection() bool { return true }

// Start makes the manager follow connections until ctx is done, and stops
// followers that have been idle too long.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	go m.queue.run(ctx, m.deliver)
	t := time.NewTicker(max(min(m.idle/2, time.Minute), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.reap()
		}
	}
}

// reap stops the followers no reconcile has used for the idle timeout, and
// those no resource follows any more after EmptyFollowerIdle.
func (m *Manager) reap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, f := range m.followers {
		unused := time.Since(f.lastUsed)
		if unused > m.idle || len(f.widgetOf) == 0 && unused > min(m.emptyIdle, m.idle) {
			m.stop(key, f)
			m.log.Debug("Stopped following an idle Widget API change feed", "endpoint", f.endpoint)
		}
	}
}

// stop stops f, the follower of connection key. The caller holds m.mu.
func (m *Manager) stop(key string, f *follower) {
	f.cancel()
	delete(m.followers, key)
	if f.namespace != "" {
		if m.perNamespace[f.namespace]--; m.perNamespace[f.namespace] <= 0 {
			delete(m.perNamespace, f.namespace)
		}
	}
	for w := range f.widgetOf {
		if m.connOf[w] == key {
			delete(m.connOf, w)
		}
	}
}

// stopFollower stops f, the follower of connection key, unless another has
// replaced it.
func (m *Manager) stopFollower(key string, f *follower) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.followers[key] == f {
		m.stop(key, f)
	}
}

// Follow makes sure c's change feed is followed and that a change to widget
// requeues the managed resource key of kind. It is cheap and safe to call on
// every reconcile; before Start it does nothing.
func (m *Manager) Follow(c *clients.Connection, kind, widget string, key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	w := watcher{kind: kind, key: key}
	if prev, ok := m.connOf[w]; ok && prev != c.Key {
		// The resource moved to another connection: the old one's feed
		// no longer concerns it.
		if pf, ok := m.followers[prev]; ok {
			if old, ok := pf.widgetOf[w]; ok {
				pf.unwatch(old, w)
				delete(pf.widgetOf, w)
			}
		}
		delete(m.connOf, w)
	}
	f, ok := m.followers[c.Key]
	if !ok {
		if !m.room(c) {
			return
		}
		f = m.start(c)
		m.followers[c.Key] = f
		if c.Namespace != "" {
			m.perNamespace[c.Namespace]++
		}
	}
	f.lastUsed = time.Now()
	if widget == "" {
		return
	}
	m.connOf[w] = c.Key
	if old, ok := f.widgetOf[w]; ok && old != widget {
		f.unwatch(old, w)
	}
	if ws := f.watchers[widget]; find(ws, w) < 0 {
		f.watchers[widget] = append(ws, watch{watcher: w})
	}
	f.widgetOf[w] = widget
}

// room reports whether a follower for c fits within the bounds. The caller
// holds m.mu.
func (m *Manager) room(c *clients.Connection) bool {
	if len(m.followers) >= m.maxFollowers {
		return false
	}
	return c.Namespace == "" || m.perNamespace[c.Namespace] < m.maxPerNamespace
}

// Forget stops requeueing the resource key of kind for changes to its
// widget: the resource is gone. Without it every deleted resource would stay
// a watcher for as long as its connection is followed.
func (m *Manager) Forget(kind string, key types.NamespacedName) {
	w := watcher{kind: kind, key: key}
	m.queue.remove(w)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.changed, w)
	f, ok := m.followers[m.connOf[w]]
	delete(m.connOf, w)
	if !ok {
		return
	}
	if widget, ok := f.widgetOf[w]; ok {
		f.unwatch(widget, w)
		delete(f.widgetOf, w)
	}
}

// unwatch removes w from widget's watchers. The caller holds the manager's
// lock.
func (f *follower) unwatch(widget string, w watcher) {
	ws := f.watchers[widget]
	i := find(ws, w)
	if i < 0 {
		return
	}
	ws = slices.Delete(ws, i, i+1)
	if len(ws) == 0 {
		delete(f.watchers, widget)
		return
	}
	f.watchers[widget] = ws
}

// Following reports whether c's change feed is followed and its last poll
// succeeded: a change to a followed widget made from now on will requeue
// its resources within a poll (unless the feed fails; then they wait for
// their own polls).
func (m *Manager) Following(c *clients.Connection) bool {
	m.mu.Lock()
	f, ok := m.followers[c.Key]
	m.mu.Unlock()
	return ok && f.live.Load()
}

// Seen records that the managed resource key of kind has just read or
// written widget at generation in state, so that change feed entries for
// that version (the echo of its own create or update) do not requeue it.
// Call it only after Follow, with what the API returned.
func (m *Manager) Seen(c *clients.Connection, kind, widget string, key types.NamespacedName, generation int64, state widgetapi.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.followers[c.Key]
	if !ok {
		return
	}
	ws := f.watchers[widget]
	if i := find(ws, watcher{kind: kind, key: key}); i >= 0 {
		ws[i].seen = version{generation: generation, state: state}
	}
}

// start starts following c. The caller holds m.mu.
func (m *Manager) start(c *clients.Connection) *follower {
	ctx, cancel := context.WithCancel(m.ctx)
	f := &follower{cancel: cancel, endpoint: c.Endpoint, namespace: c.Namespace, share: "namespace/" + c.Namespace, watchers: map[string][]watch{}, widgetOf: map[watcher]string{}}
	if c.Namespace == "" {
		f.share = "connection/" + c.Key
	}
	fl := c.Client.NewFollower(func(ctx context.Context, ch widgetapi.Change) {
		m.metrics.FeedChanges.WithLabelValues(typeLabel(ch.Type)).Inc()
		// Forgotten before the resources that follow the widget are
		// queued: their reconciles read the widget as it is now.
		m.recent.Forget(c.Key, ch.Widget)
		m.enqueue(f, &ch)
	})
	fl.Wait = m.wait
	fl.OnResync = func(ctx context.Context) {
		m.recent.ForgetConnection(c.Key)
		m.enqueue(f, nil)
	}
	fl.OnPoll = func() { f.live.Store(true) }
	fl.OnError = func(err error, retryIn time.Duration) {
		f.live.Store(false)
		if clients.IsRefused(err) {
			// The follower's token was refused, or is paused after a
			// refusal (clients.Pauses): it stops, rather than poll with
			// a token that may have been rotated since (a token file
			// keeps its connection key). The next reconcile that gets
			// past the pause follows the feed again, with the token of
			// the moment.
			m.stopFollower(c.Key, f)
			m.log.Debug("Stopped following a Widget API change feed: its token was refused", "endpoint", c.Endpoint, "error", err.Error())
			return
		}
		m.log.Debug("Cannot read the Widget API change feed; retrying", "endpoint", c.Endpoint, "error", err.Error(), "retry-in", retryIn.String())
	}
	m.log.Debug("Following the Widget API change feed", "endpoint", c.Endpoint)
	// History does not matter: the controllers reconcile everything at
	// start-up and poll afterwards.
	go fl.Run(ctx, widgetapi.FromLatest)
	return f
}

// enqueue queues, in f's share of the fair queue, every resource watching
// ch's widget (nil: all of f's) that has not already seen the widget as it
// was after ch.
func (m *Manager) enqueue(f *follower, ch *widgetapi.Change) {
	m.mu.Lock()
	var todo []watcher
	skipped := 0
	visit := func(ws []watch) {
		for _, x := range ws {
			if x.seen.covers(ch) {
				skipped++
				continue
			}
			if _, ok := m.sources[x.kind]; ok {
				todo = append(todo, x.watcher)
			}
		}
	}
	if ch != nil {
		visit(f.watchers[ch.Widget])
	} else {
		for _, ws := range f.watchers {
			visit(ws)
		}
	}
	m.mu.Unlock()
	m.metrics.FeedSkips.Add(float64(skipped))
	for _, w := range todo {
		m.queue.add(f.share, w, ch != nil)
	}
}

// deliver sends the fair queue's request for w to its controller; changed
// says it was made because w's widget changed (see Changed).
func (m *Manager) deliver(ctx context.Context, w watcher, changed bool) {
	m.mu.Lock()
	src, ok := m.sources[w.kind]
	if ok && changed && len(m.changed) < maxChanged {
		m.changed[w] = struct{}{}
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: w.key.Namespace, Name: w.key.Name}}
	select {
	case src <- event.GenericEvent{Object: obj}:
		m.metrics.FeedEnqueues.Inc()
	case <-ctx.Done():
	}
}

// typeLabel is the metric label of a change type: the type if the contract
// names it, "unknown" otherwise, so that a server (possibly one a tenant
// runs) cannot add a metric series per string it makes up.
func typeLabel(t widgetapi.ChangeType) string {
	switch t {
	case widgetapi.ChangeWidgetCreated, widgetapi.ChangeWidgetUpdated, widgetapi.ChangeWidgetState,
		widgetapi.ChangeWidgetDeleted, widgetapi.ChangeKeyCreated, widgetapi.ChangeKeyDeleted:
		return string(t)
	}
	return "unknown"
}
