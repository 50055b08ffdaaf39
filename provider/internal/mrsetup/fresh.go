package mrsetup

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Layer 2, freshGate (see the package comment): reconciles that start from
// a cache older than the controller's own last write. controller-runtime reconciles from its informer cache, which learns
// of a write only when the write's watch event arrives, a few milliseconds
// to seconds after the write returned. A resource requeued in between (the
// change feed reporting that a widget just created is Ready; a requeue that
// was queued while the write's reconcile ran) is reconciled from its copy
// before the write: the status update fails with a conflict, and the
// resource waits for a backoff and a token of the rate limit before it is
// tried again. With 1,000 new Widgets, a quarter of all writes were such
// conflicts (and with --max-reconcile-rate=1000, 2.2 per Widget).
//
// freshness remembers, per resource, the resource version of the
// controller's last write until the cache has it; freshGate puts off a
// reconcile of a resource whose cache is behind by freshRetry instead,
// without a token and without a backoff. A cache that does not catch up
// within freshMaxWait (a watch that was restarted and relisted past the
// write) stops holding the resource back.
type freshness struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]entry
	now     func() time.Time
	// pruneAt is the number of entries at which expired ones are removed
	// next (resources deleted right after a write, versions the cache
	// showed with no write pending).
	pruneAt int
	// observe, when set, is told each time behind answers true
	// ("deferred") or gives up waiting ("expired").
	observe func(outcome string)
}

// entry is what is known of one resource.
type entry struct {
	// written is the resource version of the controller's last write,
	// while the cache has not shown it.
	written string
	// seen is the resource version the cache showed last while no write
	// was pending: under load a write's watch event can arrive before
	// its response, and must then not be waited for.
	seen string
	at   time.Time
}

const (
	// freshRetry is how long a reconcile whose cache is behind waits.
	freshRetry = 100 * time.Millisecond
	// freshMaxWait is how long after a write the cache may be behind. On
	// two busy cores the cache fell more than a second behind.
	freshMaxWait = 5 * time.Second
	// freshPrune is the fewest entries at which expired ones are removed.
	freshPrune = 1024
)

func newFreshness() *freshness {
	return &freshness{entries: map[types.NamespacedName]entry{}, now: time.Now, pruneAt: freshPrune}
}

// wrote records that the controller wrote o, which now has resource
// version rv; before is its resource version before the write (an update
// that changed nothing keeps it, and has no watch event to wait for).
func (f *freshness) wrote(o client.Object, before string) {
	rv := o.GetResourceVersion()
	if rv == "" || rv == before {
		return
	}
	key := client.ObjectKeyFromObject(o)
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.entries[key].seen == rv {
		// The cache was quicker than the write's response.
		delete(f.entries, key)
		return
	}
	f.prune(now)
	f.entries[key] = entry{written: rv, at: now}
}

// cached records that the cache now holds o; deleted, that it holds o no
// more.
func (f *freshness) cached(o client.Object, deleted bool) {
	key := client.ObjectKeyFromObject(o)
	rv := o.GetResourceVersion()
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[key]
	switch {
	case deleted, ok && e.written == rv:
		delete(f.entries, key)
	case ok && e.written != "":
		// A version before the controller's write: still behind.
	default:
		f.prune(now)
		f.entries[key] = entry{seen: rv, at: now}
	}
}

// prune removes expired entries once there are pruneAt of them, and then
// waits for twice as many as are left: amortized constant time. The caller
// holds f.mu.
func (f *freshness) prune(now time.Time) {
	if len(f.entries) < f.pruneAt {
		return
	}
	for k, e := range f.entries {
		if now.Sub(e.at) >= freshMaxWait {
			delete(f.entries, k)
		}
	}
	f.pruneAt = max(freshPrune, 2*len(f.entries))
}

// behind reports whether the cache has not yet caught up with the
// controller's last write of the resource key.
func (f *freshness) behind(key types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[key]
	if !ok || e.written == "" {
		return false
	}
	if f.now().Sub(e.at) >= freshMaxWait {
		delete(f.entries, key)
		f.observed("expired")
		return false
	}
	f.observed("deferred")
	return true
}

func (f *freshness) observed(outcome string) {
	if f.observe != nil {
		f.observe(outcome)
	}
}

// freshGate puts off reconciles whose cache is behind the controller's own
// last write.
type freshGate struct {
	fresh *freshness
	next  reconcile.Reconciler
}

func (g freshGate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if g.fresh.behind(req.NamespacedName) {
		return reconcile.Result{RequeueAfter: freshRetry}, nil
	}
	return g.next.Reconcile(ctx, req)
}

// cacheObserver is a predicate that tells freshness (when set) what the
// cache holds, and status (when set) which resources are gone: predicates
// see every watch event of the controller's kind after the informer stored
// it. It filters nothing.
type cacheObserver struct {
	fresh  *freshness
	status *statusMemo
}

var _ predicate.Predicate = cacheObserver{}

func (p cacheObserver) Create(e event.CreateEvent) bool {
	if p.fresh != nil {
		p.fresh.cached(e.Object, false)
	}
	return true
}

func (p cacheObserver) Update(e event.UpdateEvent) bool {
	if p.fresh != nil {
		p.fresh.cached(e.ObjectNew, false)
	}
	return true
}

func (p cacheObserver) Delete(e event.DeleteEvent) bool {
	if p.fresh != nil {
		p.fresh.cached(e.Object, true)
	}
	if p.status != nil {
		p.status.forget(client.ObjectKeyFromObject(e.Object))
	}
	return true
}

func (p cacheObserver) Generic(event.GenericEvent) bool { return true }
