package fakes

import (
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"k8s.io/apimachinery/pkg/runtime"
)

// A Recorder is an event.Recorder that records the events it is given,
// whatever their object, and ignores annotations. Tests that do not check
// events use crossplane-runtime's event.NewNopRecorder instead. Its zero
// value is ready; it is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []event.Event
}

// Event records e.
func (r *Recorder) Event(_ runtime.Object, e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// WithAnnotations returns r: annotations are not recorded.
func (r *Recorder) WithAnnotations(...string) event.Recorder { return r }

// Events returns the events recorded so far, in order; nil for none.
func (r *Recorder) Events() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Event(nil), r.events...)
}
