package feed

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// quietFeed serves a change feed that never changes: long polls are held
// until the client gives up.
func quietFeed(t *testing.T) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("after") != "latest" {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(timeout):
			}
		}
		fmt.Fprint(w, `{"changes":[],"latestSeq":1}`)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func tenantConnection(t *testing.T, url, key, namespace string) *clients.Connection {
	t.Helper()
	c := connection(t, url, key)
	c.Namespace = namespace
	return c
}

// TestFollowerBounds checks that followers are bounded in all and per
// namespace, so that no tenant can start one per endpoint string it makes
// up, nor take every follower.
func TestFollowerBounds(t *testing.T) {
	url := quietFeed(t)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithMaxFollowers(4, 2))
	start(t, m)
	follow := []*clients.Connection{
		tenantConnection(t, url, "evil-1", "team-evil"),
		tenantConnection(t, url, "evil-2", "team-evil"),
		tenantConnection(t, url, "evil-3", "team-evil"), // over the namespace's 2
		tenantConnection(t, url, "a-1", "team-a"),
		tenantConnection(t, url, "cluster-1", ""),
		tenantConnection(t, url, "b-1", "team-b"), // over the total of 4
	}
	for i, c := range follow {
		m.Follow(c, kindWidget, "w", types.NamespacedName{Namespace: c.Namespace, Name: fmt.Sprint(i)})
	}
	m.mu.Lock()
	got := map[string]bool{}
	for k := range m.followers {
		got[k] = true
	}
	m.mu.Unlock()
	want := map[string]bool{"evil-1": true, "evil-2": true, "a-1": true, "cluster-1": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("followers started: -want, +got:\n%s", diff)
	}
}

// TestDefaultFollowerBound checks that however many distinct connections
// resources use, at most DefaultMaxFollowers feeds are followed.
func TestDefaultFollowerBound(t *testing.T) {
	url := quietFeed(t)
	m := NewManager(logging.NewNopLogger(), metrics.New())
	start(t, m)
	for i := range DefaultMaxFollowers + 10 {
		m.Follow(connection(t, url, fmt.Sprintf("endpoint-%d", i)), kindWidget, "w", types.NamespacedName{Namespace: "team-evil", Name: fmt.Sprint(i)})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if got := len(m.followers); got > DefaultMaxFollowers {
		t.Errorf("followers for %d connections: want at most %d, got %d", DefaultMaxFollowers+10, DefaultMaxFollowers, got)
	}
}

// TestEmptyFollowersAreReaped checks that a follower stops soon once no
// resource follows its feed - deleted, or moved to another connection -
// while one that is followed runs until the idle timeout.
func TestEmptyFollowersAreReaped(t *testing.T) {
	url := quietFeed(t)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithIdleTimeout(time.Hour))
	m.emptyIdle = 10 * time.Millisecond
	start(t, m)
	a, b, c := connection(t, url, "conn-a"), connection(t, url, "conn-b"), connection(t, url, "conn-c")
	m.Follow(a, kindWidget, "w1", mrA)
	m.Follow(b, kindWidget, "w2", mrB)
	m.Follow(c, kindWidget, "w3", mrC)
	// mrA moves to conn-b: conn-a's feed no longer concerns it.
	m.Follow(b, kindWidget, "w1", mrA)
	// mrC is deleted.
	m.Forget(kindWidget, mrC)

	m.mu.Lock()
	aWatches := len(m.followers["conn-a"].widgetOf)
	m.mu.Unlock()
	if aWatches != 0 {
		t.Errorf("conn-a's follower still watches %d resources after they moved to conn-b", aWatches)
	}
	time.Sleep(20 * time.Millisecond)
	m.reap()
	m.mu.Lock()
	defer m.mu.Unlock()
	got := make([]string, 0, len(m.followers))
	for k := range m.followers {
		got = append(got, k)
	}
	if diff := cmp.Diff([]string{"conn-b"}, got); diff != "" {
		t.Errorf("followers after reaping: -want, +got:\n%s", diff)
	}
}

// TestRequeueShares checks that the feed's requests reach the controllers
// in turns between namespaces: a tenant whose feed resyncs a thousand
// resources does not delay another tenant's change behind them.
func TestRequeueShares(t *testing.T) {
	url := quietFeed(t)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithRequeueRate(10))
	widgets := channel(m, kindWidget)
	start(t, m)
	evil, good := tenantConnection(t, url, "evil", "team-evil"), tenantConnection(t, url, "good", "team-a")
	const many = 1000
	for i := range many {
		m.Follow(evil, kindWidget, fmt.Sprintf("e%d", i), types.NamespacedName{Namespace: "team-evil", Name: fmt.Sprint(i)})
	}
	m.Follow(good, kindWidget, "w1", mrA)
	m.mu.Lock()
	fe, fg := m.followers["evil"], m.followers["good"]
	m.mu.Unlock()

	m.enqueue(fe, nil) // a resync: every resource of the connection
	m.enqueue(fg, &widgetapi.Change{Type: widgetapi.ChangeWidgetUpdated, Widget: "w1", Generation: 2})
	pos := 0
	for i := 1; i <= many+1; i++ {
		if receive(t, widgets) == mrA {
			pos = i
			break
		}
	}
	// Before the change was added the queue may have handed out a burst
	// of the resync (10) and taken the next request (waiting for its
	// token); after that, team-evil's turn may come first.
	if pos == 0 || pos > 13 {
		t.Errorf("team-a's change was request %d of %d: want it ahead of most of team-evil's resync", pos, many+1)
	}
	if !m.Changed(kindWidget, mrA) {
		t.Errorf("Changed(mrA): want true, the request was made because its widget changed")
	}
}

// TestRequeueRate checks that the feed's requests reach the controllers no
// faster than the requeue rate, with bursts of as many.
func TestRequeueRate(t *testing.T) {
	url := quietFeed(t)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithRequeueRate(20))
	widgets := channel(m, kindWidget)
	start(t, m)
	conn := tenantConnection(t, url, "evil", "team-evil")
	for i := range 200 {
		m.Follow(conn, kindWidget, fmt.Sprintf("e%d", i), types.NamespacedName{Namespace: "team-evil", Name: fmt.Sprint(i)})
	}
	m.mu.Lock()
	f := m.followers["evil"]
	m.mu.Unlock()
	// Resync after resync: each request is pending once.
	for range 5 {
		m.enqueue(f, nil)
	}
	if got := m.queue.len(); got > 200 {
		t.Errorf("requests pending after five resyncs of 200 resources: want at most 200, got %d", got)
	}
	time.Sleep(time.Second)
	got := len(drain(widgets))
	// A burst of 20, then 20 a second: about 40 after a second.
	if got > 45 {
		t.Errorf("requests delivered in a second at 20 a second: want at most 45, got %d", got)
	}
}

// TestFairQueue checks the fair queue's order: FIFO within a share, turns
// between shares, one request per resource pending, removals skipped.
func TestFairQueue(t *testing.T) {
	w := func(name string) watcher { return watcher{kind: kindWidget, key: types.NamespacedName{Name: name}} }
	q := newFairQueue(1, 1)
	for _, n := range []string{"e1", "e2", "e3", "e4", "e1"} {
		q.add("evil", w(n), false)
	}
	q.add("good", w("g1"), true)
	q.add("good", w("g2"), false)
	q.add("evil", w("e2"), true) // pending already: now marked changed
	q.remove(w("e3"))
	type got struct {
		Name    string
		Changed bool
	}
	var order []got
	for {
		x, changed, ok := q.next()
		if !ok {
			break
		}
		order = append(order, got{x.key.Name, changed})
	}
	want := []got{{"e1", false}, {"g1", true}, {"e2", true}, {"g2", false}, {"e4", false}}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order of requests: -want, +got:\n%s", diff)
	}
	if n := q.len(); n != 0 {
		t.Errorf("pending after all were taken: want 0, got %d", n)
	}
}

// TestChangeTypeLabels checks that change types the contract does not name
// are counted under one label: a server cannot add a metric series per
// string it makes up.
func TestChangeTypeLabels(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("after") == "latest" {
			fmt.Fprint(w, `{"changes":[],"latestSeq":1}`)
			return
		}
		fmt.Fprint(w, `{"changes":[`)
		for i := range 50 {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"seq":%d,"type":"made-up-%d","widget":"w","generation":1,"time":"2026-01-01T00:00:00Z"}`, i+2, i)
		}
		fmt.Fprint(w, `,{"seq":60,"type":"widget.updated","widget":"w","generation":1,"time":"2026-01-01T00:00:00Z"}],"latestSeq":60}`)
	}))
	t.Cleanup(hs.Close)
	met := metrics.New()
	m := NewManager(logging.NewNopLogger(), met)
	start(t, m)
	m.Follow(connection(t, hs.URL, "evil"), kindWidget, "w", mrA)
	wait.ForTrue(t, timeout, "the made-up changes to be counted", func() bool { return counter(t, met.FeedChanges.WithLabelValues("unknown")) >= 50 })
	series := make(chan prometheus.Metric, 100)
	met.FeedChanges.Collect(series)
	close(series)
	if got := len(series); got != 2 {
		t.Errorf("change type series after 50 made-up types and one known: want 2 (unknown, widget.updated), got %d", got)
	}
}
