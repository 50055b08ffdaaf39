package clients

import (
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Adaptive rate bounds, in requests per second per connection.
const (
	firstLimit = 4.0  // the client-side limit after the first 429
	minLimit   = 0.5  // never slower than this
	maxLimit   = 50.0 // above this, stop limiting client-side
	increase   = 0.05 // added per successful call
)

// A Throttle paces calls per Connection key once the Widget API has said
// "too many requests". It honours Retry-After, then admits calls through a
// client-side token bucket whose rate adapts like TCP congestion control:
// halved on every 429, raised a little on every success, and dropped once it
// is high again. So a provider with thousands of resources converges on the
// rate the API accepts instead of retrying in a storm.
type Throttle struct {
	now func() time.Time

	mu    sync.Mutex
	conns map[string]*pace
	// swept is len(conns) after the last sweep of stale entries, at
	// sweptAt.
	swept   int
	sweptAt time.Time
}

// StaleThrottle is how long after its last 429 (and the end of its
// Retry-After) a connection's pace is forgotten even if no successful call
// raised it back: a connection no longer used - a rotated token, a deleted
// ProviderConfig - must not be remembered for ever. One that is still
// limited gets a 429 again and starts over.
const StaleThrottle = 10 * time.Minute

type pace struct {
	until   time.Time     // no calls before this (Retry-After)
	lim     *rate.Limiter // nil: not limiting
	lowered time.Time     // when lim was last lowered
}

// NewThrottle returns a Throttle that limits nothing until told to.
func NewThrottle() *Throttle { return &Throttle{now: time.Now, conns: map[string]*pace{}} }

// Admit reserves a call for key. It returns 0 when the call may go now, or
// how long the caller should wait first (nothing is reserved then).
func (t *Throttle) Admit(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.conns[key]
	if !ok {
		return 0
	}
	now := t.now()
	if now.Before(p.until) {
		// Spread the retries of everyone who waited, rather than releasing
		// them together when Retry-After ends.
		d := p.until.Sub(now)
		return d + rand.N(d/2+time.Millisecond) //nolint:gosec // jitter
	}
	r := p.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// Throttled records a 429 for key with the server's Retry-After.
func (t *Throttle) Throttled(key string, retryAfter time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.conns[key]
	if !ok {
		t.sweep()
		p = &pace{}
		t.conns[key] = p
	}
	if u := t.now().Add(retryAfter); u.After(p.until) {
		p.until = u
	}
	now := t.now()
	if p.lim == nil {
		p.lim = rate.NewLimiter(firstLimit, 1)
		p.lowered = now
		return
	}
	// Calls in flight when the first 429 arrived all come back 429 too;
	// count them as one signal, not a collapse.
	if now.Sub(p.lowered) < time.Second {
		return
	}
	p.lim.SetLimitAt(now, max(p.lim.Limit()/2, minLimit))
	p.lowered = now
}

// Succeeded records a successful call for key.
func (t *Throttle) Succeeded(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.conns[key]
	if !ok || p.lim == nil {
		return
	}
	l := p.lim.Limit() + increase
	if l > maxLimit {
		delete(t.conns, key)
		return
	}
	p.lim.SetLimitAt(t.now(), l)
}

// sweep forgets stale paces each time the map has doubled since the last
// sweep, or StaleThrottle has passed, so it stays near the number of
// connections throttled in StaleThrottle. The caller holds t.mu.
func (t *Throttle) sweep() {
	now := t.now()
	if len(t.conns) < 2*t.swept+64 && now.Sub(t.sweptAt) < StaleThrottle {
		return
	}
	t.sweptAt = now
	for k, p := range t.conns {
		if now.Sub(p.until) > StaleThrottle && now.Sub(p.lowered) > StaleThrottle {
			delete(t.conns, k)
		}
	}
	t.swept = len(t.conns)
}
