package clients

import (
	"maps"
	"time"

	"github.com/widgetco/crossplane-widget/provider/internal/ttlmap"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// RecentWidgets remembers, per connection, the widgets the provider read or
// wrote in the last TTL, so that a WidgetKey reconciled again soon does not
// read its widget again. While a control plane converges a WidgetKey is
// reconciled several times a minute (its own writes, the change feed, retries
// after conflicts), and each of its observations read the widget: the
// tenancy check and the endpoint it publishes. At 400 claims and XWidgets at
// once (600 keys) the provider read widgets 2,289 times (5.7 per widget),
// against 1,284 requests for the keys themselves.
//
// Only what a stale answer cannot turn into access is served from memory:
// the observation of a key (whether its widget is within the resource's
// reach decides which error it reports, and the endpoint it publishes). The
// check that creates a key - and so hands out a secret - always reads the
// widget from the Widget API (see the WidgetKey controller's Create). A
// change the change feed reports forgets the widget at once (a read that was
// under way when the change was made may still be remembered after it); the
// memory is never more than TTL old, and TTL is at most half a poll
// interval, so every poll reads the widget.
type RecentWidgets struct {
	m *ttlmap.Map[recentKey, widgetapi.Widget]
}

type recentKey struct{ conn, name string }

// MaxRecentTTL bounds how long a widget is remembered.
const MaxRecentTTL = 30 * time.Second

// NewRecentWidgets returns a memory of widgets for resources polled every
// poll: it remembers a widget for min(MaxRecentTTL, poll/2).
func NewRecentWidgets(poll time.Duration) *RecentWidgets {
	return &RecentWidgets{m: ttlmap.New[recentKey, widgetapi.Widget](min(MaxRecentTTL, poll/2))}
}

// Recall returns a copy of the widget name of connection conn, if it was
// remembered less than TTL ago.
func (r *RecentWidgets) Recall(conn, name string) (*widgetapi.Widget, bool) {
	if r == nil {
		return nil, false
	}
	w, ok := r.m.Get(recentKey{conn, name})
	if !ok {
		return nil, false
	}
	w.Labels = maps.Clone(w.Labels)
	return &w, true
}

// Remember remembers a copy of w, as the Widget API returned it just now.
func (r *RecentWidgets) Remember(conn string, w *widgetapi.Widget) {
	if r == nil || w == nil {
		return
	}
	cp := *w
	cp.Labels = maps.Clone(w.Labels)
	r.m.Put(recentKey{conn, w.Name}, cp)
}

// Forget forgets the widget name of connection conn: it changed.
func (r *RecentWidgets) Forget(conn, name string) {
	if r == nil {
		return
	}
	r.m.Delete(recentKey{conn, name})
}

// ForgetConnection forgets every widget of connection conn.
func (r *RecentWidgets) ForgetConnection(conn string) {
	if r == nil {
		return
	}
	r.m.DeleteFunc(func(k recentKey) bool { return k.conn == conn })
}
