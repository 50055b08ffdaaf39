// Package ratelimit provides a controller work queue rate limiter that
// honours delays requested for individual requests, such as a Widget API
// Retry-After, on top of the usual per-item exponential backoff.
package ratelimit

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A Limiter is a workqueue.TypedRateLimiter whose delay for a request is the
// larger of the inner limiter's and any delay requested with After.
type Limiter struct {
	inner workqueue.TypedRateLimiter[reconcile.Request]
	now   func() time.Time

	mu    sync.Mutex
	hints map[reconcile.Request]time.Time
}

// New wraps inner.
func New(inner workqueue.TypedRateLimiter[reconcile.Request]) *Limiter {
	return &Limiter{inner: inner, now: time.Now, hints: map[reconcile.Request]time.Time{}}
}

// After asks that req is not retried sooner than d from now. It applies to
// the request's next rate-limited requeue only.
func (l *Limiter) After(req reconcile.Request, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.now().Add(d)
	if u.After(l.hints[req]) {
		l.hints[req] = u
	}
}

// When returns how long to wait before retrying req: the requested delay if
// there is one - without escalating req's exponential backoff, since being
// asked to wait is not a failure of req - or else the inner limiter's.
func (l *Limiter) When(req reconcile.Request) time.Duration {
	l.mu.Lock()
	u, ok := l.hints[req]
	delete(l.hints, req)
	l.mu.Unlock()
	if ok {
		return max(u.Sub(l.now()), 0)
	}
	return l.inner.When(req)
}

// Forget resets req's backoff.
func (l *Limiter) Forget(req reconcile.Request) {
	l.inner.Forget(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.hints, req)
}

// NumRequeues returns how often req has been requeued.
func (l *Limiter) NumRequeues(req reconcile.Request) int { return l.inner.NumRequeues(req) }
