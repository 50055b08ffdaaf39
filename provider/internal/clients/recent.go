package clients

import (
	"maps"
	"sync"
	"time"

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
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[recentKey]recentWidget
	// swept is the number of entries after the last sweep.
	swept int
}

type recentKey struct{ conn, name string }

type recentWidget struct {
	w  widgetapi.Widget
	at time.Time
}

// MaxRecentTTL bounds how long a widget is remembered.
const MaxRecentTTL = 30 * time.Second

// NewRecentWidgets returns a memory of widgets for resources polled every
// poll: it remembers a widget for min(MaxRecentTTL, poll/2).
func NewRecentWidgets(poll time.Duration) *RecentWidgets {
	return &RecentWidgets{ttl: min(MaxRecentTTL, poll/2), now: time.Now, m: map[recentKey]recentWidget{}}
}

// Recall returns a copy of the widget name of connection conn, if it was
// remembered less than TTL ago.
func (r *RecentWidgets) Recall(conn, name string) (*widgetapi.Widget, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[recentKey{conn, name}]
	if !ok || r.now().Sub(e.at) >= r.ttl {
		return nil, false
	}
	w := e.w
	w.Labels = maps.Clone(e.w.Labels)
	return &w, true
}

// Remember remembers a copy of w, as the Widget API returned it just now.
func (r *RecentWidgets) Remember(conn string, w *widgetapi.Widget) {
	if r == nil || r.ttl <= 0 || w == nil {
		return
	}
	cp := *w
	cp.Labels = maps.Clone(w.Labels)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[recentKey{conn, w.Name}] = recentWidget{w: cp, at: now}
	if len(r.m) > 2*r.swept+64 {
		// Amortised: expired entries are dropped each time the memory
		// doubles.
		for k, e := range r.m {
			if now.Sub(e.at) >= r.ttl {
				delete(r.m, k)
			}
		}
		r.swept = len(r.m)
	}
}

// Forget forgets the widget name of connection conn: it changed.
func (r *RecentWidgets) Forget(conn, name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, recentKey{conn, name})
}

// ForgetConnection forgets every widget of connection conn.
func (r *RecentWidgets) ForgetConnection(conn string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.m {
		if k.conn == conn {
			delete(r.m, k)
		}
	}
}
