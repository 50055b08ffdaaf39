package fakes

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A Delay is one call of Delayer.After.
type Delay struct {
	Req reconcile.Request
	D   time.Duration
}

// A Delayer is a clients.Delayer that records the delays asked for and
// delays nothing. Its zero value is ready; it is safe for concurrent use.
type Delayer struct {
	mu     sync.Mutex
	delays []Delay
}

// After records that req asked not to be retried sooner than d.
func (f *Delayer) After(req reconcile.Request, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delays = append(f.delays, Delay{Req: req, D: d})
}

// Delays returns the delays asked for since the Delayer was made or last
// Reset, in order; nil for none.
func (f *Delayer) Delays() []Delay {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Delay(nil), f.delays...)
}

// Reset forgets the delays asked for so far.
func (f *Delayer) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delays = nil
}
