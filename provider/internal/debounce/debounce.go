// Package debounce turns bursts of watch events into one reconcile: the
// requests an event handler enqueues wait a while in the work queue, where
// the queue merges duplicates.
package debounce

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Handler wraps h so that the requests it enqueues wait d in the queue. A
// request that is already waiting keeps its earlier time, so every event in
// a burst becomes one reconcile.
func Handler(h handler.EventHandler, d time.Duration) handler.EventHandler {
	return debounced{h: h, d: d}
}

type debounced struct {
	h handler.EventHandler
	d time.Duration
}

var _ handler.EventHandler = debounced{}

func (e debounced) Create(ctx context.Context, evt event.CreateEvent, q resource.RateLimitingInterface) {
	e.h.Create(ctx, evt, delayed{q, e.d})
}

func (e debounced) Update(ctx context.Context, evt event.UpdateEvent, q resource.RateLimitingInterface) {
	e.h.Update(ctx, evt, delayed{q, e.d})
}

func (e debounced) Delete(ctx context.Context, evt event.DeleteEvent, q resource.RateLimitingInterface) {
	e.h.Delete(ctx, evt, delayed{q, e.d})
}

func (e debounced) Generic(ctx context.Context, evt event.GenericEvent, q resource.RateLimitingInterface) {
	e.h.Generic(ctx, evt, delayed{q, e.d})
}

// delayed turns a queue's Add into AddAfter.
type delayed struct {
	resource.RateLimitingInterface
	d time.Duration
}

func (q delayed) Add(r reconcile.Request) { q.AddAfter(r, q.d) }
