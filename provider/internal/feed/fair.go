package feed

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
)

// fairQueue holds the requests the change feed makes - for a change, or for
// every resource of a connection after a resync - and hands them out at a
// bounded total rate, taking turns between shares (a tenant's namespace, or
// a cluster-scoped connection): a share with a thousand requests pending
// waits behind its own, not in front of everyone else's. A request already
// pending is not added twice, so a share's backlog never exceeds its
// watchers, however often its feed reports changes.
type fairQueue struct {
	lim *rate.Limiter

	mu     sync.Mutex
	shares map[string]*share
	// turns are the shares with requests pending, in the order they take
	// turns.
	turns []string
	// size is the number of requests pending, in all shares.
	size int
	wake chan struct{}
}

// share is one share's pending requests: order is FIFO, pending says which
// are still wanted and whether one was made because its widget changed.
type share struct {
	order   []watcher
	pending map[watcher]bool
}

// maxPending bounds the requests pending in all shares. Beyond it requests
// are dropped: the resources' polls are the safety net.
const maxPending = 100000

func newFairQueue(perSecond float64, burst int) *fairQueue {
	return &fairQueue{lim: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1)), shares: map[string]*share{}, wake: make(chan struct{}, 1)}
}

// add queues a request for w in share s, unless one is pending; changed
// marks it as made because w's widget changed (it sticks once set).
func (q *fairQueue) add(s string, w watcher, changed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	sh, ok := q.shares[s]
	if !ok {
		sh = &share{pending: map[watcher]bool{}}
		q.shares[s] = sh
	}
	if c, ok := sh.pending[w]; ok {
		sh.pending[w] = c || changed
		return
	}
	if q.size >= maxPending {
		if len(sh.order) == 0 {
			delete(q.shares, s)
		}
		return
	}
	if len(sh.order) == 0 {
		q.turns = append(q.turns, s)
	}
	sh.order = append(sh.order, w)
	sh.pending[w] = changed
	q.size++
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// remove drops w's pending request, in whichever share it is.
func (q *fairQueue) remove(w watcher) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, sh := range q.shares {
		delete(sh.pending, w) // its place in order is skipped by next
	}
}

// next takes the next request: the oldest of the share whose turn it is.
func (q *fairQueue) next() (watcher, bool, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.turns) > 0 {
		s := q.turns[0]
		q.turns = q.turns[1:]
		sh := q.shares[s]
		for len(sh.order) > 0 {
			w := sh.order[0]
			sh.order = sh.order[1:]
			q.size--
			changed, ok := sh.pending[w]
			if !ok {
				continue // removed
			}
			delete(sh.pending, w)
			if len(sh.order) > 0 {
				q.turns = append(q.turns, s)
			} else {
				delete(q.shares, s)
			}
			return w, changed, true
		}
		delete(q.shares, s)
	}
	return watcher{}, false, false
}

// run hands requests to deliver, at most the queue's rate, until ctx is
// done.
func (q *fairQueue) run(ctx context.Context, deliver func(ctx context.Context, w watcher, changed bool)) {
	for {
		w, changed, ok := q.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			}
		}
		if err := q.lim.Wait(ctx); err != nil {
			return
		}
		deliver(ctx, w, changed)
	}
}

// len is the number of requests pending (removed ones included until their
// turn).
func (q *fairQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.size
}
