package clients

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// A Follower follows a connection's change feed and requeues the managed
// resource key of kind when widget changes. Calls must be cheap and
// idempotent: every reconcile makes one.
type Follower interface {
	Follow(c *Connection, kind, widget string, key types.NamespacedName)
	// Seen records the widget version key has just read or written, so
	// the feed's echo of that version does not requeue it.
	Seen(c *Connection, kind, widget string, key types.NamespacedName, generation int64, state widgetapi.State)
}

// A Delayer asks the controller not to retry a request sooner than d.
type Delayer interface {
	After(req reconcile.Request, d time.Duration)
}

// A Gate connects managed resources to the Widget API on behalf of a
// controller, and keeps the controller from hammering an API that is rate
// limiting it: after a 429, calls through the same connection are skipped and
// the managed resources are requeued after the server's Retry-After.
type Gate struct {
	Resolver *Resolver
	Throttle *Throttle
	Feeds    Follower
}

// A Session is one reconcile's connection.
type Session struct {
	*Connection
	gate   *Gate
	req    reconcile.Request
	delay  Delayer
	kind   string
	widget string
}

// Connect resolves mg's connection. It fails without calling the API while
// the connection is throttled. kind and widget say which change feed entries
// concern mg.
func (g *Gate) Connect(ctx context.Context, mg resource.Managed, delay Delayer, kind, widget string) (*Session, error) {
	c, err := g.Resolver.Resolve(ctx, mg)
	if err != nil {
		return nil, err
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}}
	// A short wait is cheaper than a failed reconcile and a condition that
	// flaps; a long one frees the worker and requeues.
	deadline := time.Now().Add(maxWait)
	for d := g.Throttle.Admit(c.Key); d > 0; d = g.Throttle.Admit(c.Key) {
		if time.Until(deadline) < d {
			delay.After(req, d)
			return nil, errors.Errorf("the Widget API at %s is rate limiting this provider; retrying in %s", c.Endpoint, d.Round(100*time.Millisecond))
		}
		if err := sleep(ctx, d); err != nil {
			return nil, errors.Wrap(err, "cannot wait for the Widget API rate limit")
		}
	}
	if g.Feeds != nil {
		g.Feeds.Follow(c, kind, widget, req.NamespacedName)
	}
	return &Session{Connection: c, gate: g, req: req, delay: delay, kind: kind, widget: widget}, nil
}

// maxWait is the longest a reconcile waits in Connect for the rate limit;
// longer waits requeue instead, freeing the worker.
const maxWait = 2 * time.Second

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Seen tells the change feed which version of the session's widget this
// reconcile has read or written (w as the API returned it).
func (s *Session) Seen(w *widgetapi.Widget) {
	if s.gate.Feeds == nil || w == nil || w.Name != s.widget {
		return
	}
	s.gate.Feeds.Seen(s.Connection, s.kind, s.widget, s.req.NamespacedName, w.Generation, w.State)
}

// Check inspects an API error: a 429 throttles the connection and delays
// this resource's retry by the server's Retry-After. It returns err.
func (s *Session) Check(err error) error {
	if d, ok := widgetapi.IsRateLimited(err); ok {
		d = max(d, time.Second)
		s.gate.Throttle.Throttled(s.Key, d)
		s.delay.After(s.req, d)
	}
	return err
}
