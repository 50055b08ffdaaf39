package clients

import (
	"sync"
	"time"
)

// A Throttle remembers, per Connection key, until when the Widget API asked
// callers to back off (429 Retry-After). While a key is throttled, callers
// skip the API instead of adding to the storm.
type Throttle struct {
	now func() time.Time

	mu    sync.Mutex
	until map[string]time.Time
}

// NewThrottle returns an empty Throttle.
func NewThrottle() *Throttle { return &Throttle{now: time.Now, until: map[string]time.Time{}} }

// Set throttles key for d (a longer existing throttle is kept).
func (t *Throttle) Set(key string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.now().Add(d)
	if u.After(t.until[key]) {
		t.until[key] = u
	}
}

// Remaining returns how long key stays throttled (0 when it is not).
func (t *Throttle) Remaining(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	u, ok := t.until[key]
	if !ok {
		return 0
	}
	d := u.Sub(t.now())
	if d <= 0 {
		delete(t.until, key)
		return 0
	}
	return d
}
