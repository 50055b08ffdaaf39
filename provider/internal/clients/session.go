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
	// Following reports whether changes to c's widgets made from now on
	// will requeue the resources that follow them.
	Following(c *Connection) bool
	// Seen records the widget version key has just read or written, so
	// the feed's echo of that version does not requeue it.
	Seen(c *Connection, kind, widget string, key types.NamespacedName, generation int64, state widgetapi.State)
}

// A Delayer asks the controller not to retry a request sooner than d.
type Delayer interface {
	After(req reconcile.Request, d time.Duration)
}

// Sessions opens Widget API sessions for managed resources on behalf of a
// controller, and keeps the controller from hammering an API that is rate
// limiting it: after a 429, sessions on the same connection are not opened
// and the managed resources are requeued after the server's Retry-After.
type Sessions struct {
	Resolver *Resolver
	Throttle *Throttle
	Feeds    Follower
	// Recheck, when positive, is how long after creating a widget that is
	// not yet ready its resource waits for its next reconcile when the
	// change feed follows the widget, instead of the reconciler's default
	// requeue (a second, then exponentially longer): the feed requeues the
	// resource when the widget turns Ready or fails, and Recheck is the
	// safety net.
	Recheck time.Duration
	// Recent, when set, remembers the widgets sessions read and write, for
	// RecentWidget.
	Recent *RecentWidgets
}

// Open resolves mg's connection and returns a session for one reconcile. It
// fails without calling the API, and without following the change feed,
// while the connection's credential is paused (the Widget API refused it)
// or the connection is throttled. kind and widget say which change feed
// entries concern mg.
func (g *Sessions) Open(ctx context.Context, mg resource.Managed, delay Delayer, kind, widget string) (*Session, error) {
	c, err := g.Resolver.Resolve(ctx, mg)
	if err != nil {
		return nil, err
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}}
	// A paused credential's resources retry with the controller's backoff
	// (at most a minute), not at the end of the pause: such a retry costs
	// no Widget API call, and a token that was fixed meanwhile is used at
	// the first one.
	if _, err := c.Paused(); err != nil {
		return nil, err
	}
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
	return &Session{conn: c, sessions: g, req: req, delay: delay, kind: kind, widget: widget}, nil
}

// maxWait is the longest a reconcile waits in Open for the rate limit;
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

// A Session is one reconcile's connection to the Widget API. Every call
// through it is guarded, so no caller can forget to:
//
//   - a 429 throttles the connection for every resource that uses it and
//     delays this resource's retry by the server's Retry-After (at least a
//     second);
//   - a version of the session's widget that a call read or wrote is
//     reported to the change feed, so the feed's echo of the provider's own
//     write costs no reconcile.
//
// A Session hands out no unguarded client: a new Widget API call needs a
// method here.
type Session struct {
	conn     *Connection
	sessions *Sessions
	req      reconcile.Request
	delay    Delayer
	kind     string
	widget   string
}

// Key identifies the session's endpoint and credentials (see Connection).
func (s *Session) Key() string { return s.conn.Key }

// GetWidget reads a widget from the Widget API.
func (s *Session) GetWidget(ctx context.Context, name string) (*widgetapi.Widget, error) {
	w, err := s.saw(s.conn.Client.GetWidget(ctx, name))
	if widgetapi.IsNotFound(err) {
		s.sessions.Recent.Forget(s.conn.Key, name)
	}
	return w, err
}

// RecentWidget returns the widget as this provider read or wrote it moments
// ago (see RecentWidgets), or reads it. Never use it for a decision that
// grants access.
func (s *Session) RecentWidget(ctx context.Context, name string) (*widgetapi.Widget, error) {
	if w, ok := s.sessions.Recent.Recall(s.conn.Key, name); ok {
		s.seen(w)
		return w, nil
	}
	return s.GetWidget(ctx, name)
}

// CreateWidget creates a widget. When the change feed follows it (since
// before the create, so that no change can be missed) and it is not ready
// yet, its resource is next reconciled when the feed reports the widget's
// next state, or after Sessions.Recheck.
func (s *Session) CreateWidget(ctx context.Context, req widgetapi.CreateWidgetRequest) (*widgetapi.Widget, error) {
	following := s.sessions.Feeds != nil && s.sessions.Recheck > 0 && req.Name == s.widget && s.sessions.Feeds.Following(s.conn)
	w, err := s.saw(s.conn.Client.CreateWidget(ctx, req))
	if err == nil && following && w.State != widgetapi.StateReady {
		s.delay.After(s.req, s.sessions.Recheck)
	}
	return w, err
}

// ReplaceWidget replaces a widget's mutable fields.
func (s *Session) ReplaceWidget(ctx context.Context, name string, req widgetapi.ReplaceWidgetRequest, opts ...widgetapi.RequestOption) (*widgetapi.Widget, error) {
	return s.saw(s.conn.Client.ReplaceWidget(ctx, name, req, opts...))
}

// DeleteWidget starts deleting a widget.
func (s *Session) DeleteWidget(ctx context.Context, name string, opts ...widgetapi.RequestOption) (*widgetapi.Widget, error) {
	return s.saw(s.conn.Client.DeleteWidget(ctx, name, opts...))
}

// ListWidgets reads one page of the project's widgets.
func (s *Session) ListWidgets(ctx context.Context, o widgetapi.ListWidgetsOptions) (*widgetapi.WidgetList, error) {
	l, err := s.conn.Client.ListWidgets(ctx, o)
	return l, s.check(err)
}

// GetKey reads a key of a widget.
func (s *Session) GetKey(ctx context.Context, widget, key string) (*widgetapi.Key, error) {
	k, err := s.conn.Client.GetKey(ctx, widget, key)
	return k, s.check(err)
}

// ListKeys reads the keys of a widget.
func (s *Session) ListKeys(ctx context.Context, widget string) (*widgetapi.KeyList, error) {
	l, err := s.conn.Client.ListKeys(ctx, widget)
	return l, s.check(err)
}

// CreateKey creates a key of a widget; the result holds the key's secret.
func (s *Session) CreateKey(ctx context.Context, widget string, req widgetapi.CreateKeyRequest) (*widgetapi.KeyWithSecret, error) {
	k, err := s.conn.Client.CreateKey(ctx, widget, req)
	return k, s.check(err)
}

// DeleteKey revokes a key of a widget.
func (s *Session) DeleteKey(ctx context.Context, widget, key string) error {
	return s.check(s.conn.Client.DeleteKey(ctx, widget, key))
}

// saw reports w to the change feed when it is a version of the session's
// widget, remembers it (see RecentWidgets), and checks err.
func (s *Session) saw(w *widgetapi.Widget, err error) (*widgetapi.Widget, error) {
	s.seen(w)
	if err == nil {
		s.sessions.Recent.Remember(s.conn.Key, w)
	}
	return w, s.check(err)
}

// seen reports w to the change feed when it is a version of the session's
// widget: the feed's echo of it needs no reconcile.
func (s *Session) seen(w *widgetapi.Widget) {
	if f := s.sessions.Feeds; f != nil && w != nil && w.Name == s.widget {
		f.Seen(s.conn, s.kind, s.widget, s.req.NamespacedName, w.Generation, w.State)
	}
}

// MaxRetryAfter bounds how long a 429's Retry-After holds a connection and
// its resources back: a server (possibly one a tenant runs) that asks for
// days does not stop its resources from being reconciled for days.
const MaxRetryAfter = time.Hour

// check throttles the connection and delays the resource after a 429, for
// the server's Retry-After, at least a second and at most MaxRetryAfter. It
// returns err.
func (s *Session) check(err error) error {
	if d, ok := widgetapi.IsRateLimited(err); ok {
		d = min(max(d, time.Second), MaxRetryAfter)
		s.sessions.Throttle.Throttled(s.conn.Key, d)
		s.delay.After(s.req, d)
	}
	return err
}
