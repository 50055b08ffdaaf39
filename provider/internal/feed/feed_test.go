package feed

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// timeout bounds every wait: generous, for a slow shared machine.
const timeout = 30 * time.Second

const (
	kindWidget = "Widget.widget.m.widgetco.io"
	kindKey    = "WidgetKey.widget.m.widgetco.io"
)

var (
	mrA  = types.NamespacedName{Namespace: "team-a", Name: "a"}
	mrB  = types.NamespacedName{Namespace: "team-a", Name: "b"}
	mrC  = types.NamespacedName{Namespace: "team-b", Name: "c"}
	keyA = types.NamespacedName{Namespace: "team-a", Name: "key-a"}
	keyB = types.NamespacedName{Namespace: "team-a", Name: "key-b"}
)

// feedServer serves a reference server's API and reports when a change feed
// follower starts its first long poll (a read after a position, so the
// follower knows where it is). With hold, that poll waits until release.
type feedServer struct {
	url     string
	polled  chan struct{}
	release func()
}

func newFeedServer(t *testing.T, env *apitest.Env, hold bool) *feedServer {
	t.Helper()
	gate := make(chan struct{})
	var once, releaseOnce sync.Once
	fs := &feedServer{polled: make(chan struct{}), release: func() { releaseOnce.Do(func() { close(gate) }) }}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/changes" && r.URL.Query().Get("after") != "latest" {
			once.Do(func() {
				close(fs.polled)
				if hold {
					<-gate
				}
			})
		}
		env.HTTP.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(fs.release) // runs before hs.Close
	fs.url = hs.URL
	return fs
}

func (fs *feedServer) waitPolled(t *testing.T) {
	t.Helper()
	select {
	case <-fs.polled:
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for the follower's first long poll", timeout)
	}
}

func connection(t *testing.T, url, key string) *clients.Connection {
	t.Helper()
	c, err := widgetapi.New(url, widgetapi.WithToken(apitest.TokenA))
	if err != nil {
		t.Fatal(err)
	}
	return &clients.Connection{Client: c, Key: key, Endpoint: url}
}

// start runs m until the test ends.
func start(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Start(ctx); err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wait.ForTrue(t, timeout, "the manager to start", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.ctx != nil
	})
}

// channel returns the channel behind m.Source(kind).
func channel(m *Manager, kind string) chan event.GenericEvent {
	m.Source(kind)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sources[kind]
}

// receive waits for the next event on ch and returns its object's key.
func receive(t *testing.T, ch <-chan event.GenericEvent) types.NamespacedName {
	t.Helper()
	select {
	case e := <-ch:
		return types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for a change feed event", timeout)
		return types.NamespacedName{}
	}
}

// drain returns the keys of the events already queued on ch.
func drain(ch <-chan event.GenericEvent) []types.NamespacedName {
	var out []types.NamespacedName
	for {
		select {
		case e := <-ch:
			out = append(out, types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
		default:
			return out
		}
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func create(t *testing.T, c *widgetapi.Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.CreateWidget(t.Context(), widgetapi.CreateWidgetRequest{Name: n}); err != nil {
			t.Fatalf("CreateWidget(%s): %v", n, err)
		}
	}
}

func describe(t *testing.T, c *widgetapi.Client, name, desc string) {
	t.Helper()
	if _, err := c.PatchWidget(t.Context(), name, widgetapi.PatchWidgetRequest{Description: &desc}); err != nil {
		t.Fatalf("PatchWidget(%s): %v", name, err)
	}
}

// stable keeps widgets Provisioning, so the only changes are the test's.
func stable(o *server.Options) { o.ProvisionDelay = time.Hour }

func sortKeys() cmp.Option {
	return cmpopts.SortSlices(func(a, b types.NamespacedName) bool { return a.String() < b.String() })
}

// TestEvents checks which resources the change feed queues: exactly those
// following a changed widget, of every kind, and after the follower fell
// behind what the server retains, all of the connection's.
func TestEvents(t *testing.T) {
	// Every case follows these, on one connection.
	watches := []struct {
		kind, widget string
		key          types.NamespacedName
	}{
		{kindWidget, "w1", mrA},
		{kindKey, "w1", keyA},
		{kindWidget, "w2", mrB},
		{kindKey, "w2", keyB},
		// No controller registered this kind: its events go nowhere.
		{"Unregistered.kind", "w1", mrB},
		// The sentinel: a change to w3 after the case's changes marks the
		// point by which all their events are queued.
		{kindWidget, "w3", mrC},
	}
	type want struct {
		widgets, keys []types.NamespacedName
		// changes is the number of changes the feed delivers, the
		// sentinel's included.
		changes float64
		// changed: the requests were made because the resources' widgets
		// changed (Changed), not by a resync.
		changed bool
	}
	cases := map[string]struct {
		reason string
		// retention is how many changes the server keeps (0: default).
		retention uint64
		// hold holds the follower's first long poll while the changes
		// are made, so it falls behind.
		hold    bool
		changes []string
		want    want
	}{
		"Change": {
			reason:  "A change to a widget queues every resource following it, of each kind, and nothing else.",
			changes: []string{"w1"},
			want:    want{widgets: []types.NamespacedName{mrA}, keys: []types.NamespacedName{keyA}, changes: 2, changed: true},
		},
		"TwoChanges": {
			reason:  "Changes to two widgets queue the followers of both.",
			changes: []string{"w1", "w2"},
			want:    want{widgets: []types.NamespacedName{mrA, mrB}, keys: []types.NamespacedName{keyA, keyB}, changes: 3, changed: true},
		},
		"UnwatchedWidget": {
			reason:  "A change to a widget nobody follows queues nothing.",
			changes: []string{"w4"},
			want:    want{changes: 2},
		},
		"Resync": {
			reason: "A follower whose position expired (w1 changed three times while the server keeps one change) " +
				"queues every resource following the connection: any of their widgets may have changed.",
			retention: 1,
			hold:      true,
			changes:   []string{"w1", "w1", "w1"},
			want:      want{widgets: []types.NamespacedName{mrA, mrB, mrC}, keys: []types.NamespacedName{keyA, keyB}, changes: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				stable(o)
				o.FeedRetention = tc.retention
			}))
			api := env.Client(t, apitest.TokenA)
			create(t, api, "w1", "w2", "w3", "w4")
			fs := newFeedServer(t, env, tc.hold)

			met := metrics.New()
			m := NewManager(logging.NewNopLogger(), met, WithWait(time.Second))
			widgets, keys := channel(m, kindWidget), channel(m, kindKey)
			start(t, m)
			conn := connection(t, fs.url, "conn-a")
			for _, w := range watches {
				m.Follow(conn, w.kind, w.widget, w.key)
			}
			fs.waitPolled(t)
			for i, w := range tc.changes {
				describe(t, api, w, fmt.Sprintf("change %d", i))
			}
			fs.release()

			var gotWidgets, gotKeys []types.NamespacedName
			deadline := time.After(timeout)
			for len(gotWidgets)+len(gotKeys) < len(tc.want.widgets)+len(tc.want.keys) {
				select {
				case e := <-widgets:
					gotWidgets = append(gotWidgets, types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
				case e := <-keys:
					gotKeys = append(gotKeys, types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
				case <-deadline:
					t.Fatalf("%s\ntimed out after %s; queued so far: %v and %v", tc.reason, timeout, gotWidgets, gotKeys)
				}
			}
			// The follower delivers changes in order, so once the
			// sentinel's event is here, every event before it is queued.
			describe(t, api, "w3", "sentinel")
			for {
				k := receive(t, widgets)
				if k == mrC && len(gotWidgets) >= len(tc.want.widgets) {
					break
				}
				gotWidgets = append(gotWidgets, k)
			}
			gotWidgets = append(gotWidgets, drain(widgets)...)
			gotKeys = append(gotKeys, drain(keys)...)

			if diff := cmp.Diff(tc.want.widgets, gotWidgets, sortKeys(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nWidget requests queued: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.keys, gotKeys, sortKeys(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nWidgetKey requests queued: -want, +got:\n%s", tc.reason, diff)
			}
			if got := counter(t, met.FeedChanges.WithLabelValues(string(widgetapi.ChangeWidgetUpdated))); got != tc.want.changes {
				t.Errorf("%s\nfeed changes counted: want %v, got %v", tc.reason, tc.want.changes, got)
			}
			// Requests for a changed widget, and only those, say so to
			// Changed, once each (mrC is the sentinel's).
			for kind, keys := range map[string][]types.NamespacedName{kindWidget: tc.want.widgets, kindKey: tc.want.keys} {
				for _, k := range keys {
					if k == mrC {
						continue
					}
					if got := m.Changed(kind, k); got != tc.want.changed {
						t.Errorf("%s\nChanged(%s, %s): want %t, got %t", tc.reason, kind, k, tc.want.changed, got)
					}
					if m.Changed(kind, k) {
						t.Errorf("%s\nChanged(%s, %s) a second time: want false, got true", tc.reason, kind, k)
					}
				}
			}
			// The counter may be bumped just after the request is queued.
			want := float64(len(tc.want.widgets) + len(tc.want.keys) + 1)
			wait.ForTrue(t, timeout, "feed enqueues counted (the sentinel's included)", func() bool { return counter(t, met.FeedEnqueues) == want })
			if got := counter(t, met.FeedEnqueues); got != want {
				t.Errorf("%s\nfeed enqueues counted: want %v (the sentinel's included), got %v", tc.reason, want, got)
			}
		})
	}
}

// TestForget: a resource that names another widget, or is deleted, stops
// watching its old widget; the others keep theirs.
func TestForget(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	conn := connection(t, env.URL, "conn-a")
	w := func(kind string, key types.NamespacedName) watch {
		return watch{watcher: watcher{kind: kind, key: key}}
	}
	cases := map[string]struct {
		reason       string
		do           func(m *Manager)
		wantWatchers map[string][]watch
	}{
		"Deleted": {
			reason: "A deleted resource no longer watches its widget; another resource watching the same widget still does.",
			do: func(m *Manager) {
				m.Follow(conn, kindWidget, "w1", mrA)
				m.Follow(conn, kindKey, "w1", keyA)
				m.Follow(conn, kindWidget, "w2", mrB)
				m.Forget(kindWidget, mrA)
			},
			wantWatchers: map[string][]watch{"w1": {w(kindKey, keyA)}, "w2": {w(kindWidget, mrB)}},
		},
		"LastWatcher": {
			reason: "A widget nobody watches any more is dropped.",
			do: func(m *Manager) {
				m.Follow(conn, kindWidget, "w1", mrA)
				m.Forget(kindWidget, mrA)
			},
			wantWatchers: map[string][]watch{},
		},
		"Renamed": {
			reason: "A resource whose external name changed watches only its new widget.",
			do: func(m *Manager) {
				m.Follow(conn, kindWidget, "w1", mrA)
				m.Follow(conn, kindWidget, "w2", mrA)
			},
			wantWatchers: map[string][]watch{"w2": {w(kindWidget, mrA)}},
		},
		"OtherKindSameName": {
			reason: "Forgetting a Widget does not forget a WidgetKey of the same name.",
			do: func(m *Manager) {
				m.Follow(conn, kindWidget, "w1", mrA)
				m.Follow(conn, kindKey, "w1", mrA)
				m.Forget(kindWidget, mrA)
			},
			wantWatchers: map[string][]watch{"w1": {w(kindKey, mrA)}},
		},
		"NeverFollowed": {
			reason: "Forgetting a resource that never followed anything changes nothing.",
			do: func(m *Manager) {
				m.Follow(conn, kindWidget, "w1", mrA)
				m.Forget(kindWidget, mrB)
			},
			wantWatchers: map[string][]watch{"w1": {w(kindWidget, mrA)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewManager(logging.NewNopLogger(), metrics.New())
			start(t, m)
			tc.do(m)
			m.mu.Lock()
			defer m.mu.Unlock()
			if diff := cmp.Diff(tc.wantWatchers, m.followers[conn.Key].watchers, cmp.AllowUnexported(watch{}, watcher{}, version{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nwatchers: -want, +got:\n%s", tc.reason, diff)
			}
			for wt, widget := range m.followers[conn.Key].widgetOf {
				if find(m.followers[conn.Key].watchers[widget], wt) < 0 {
					t.Errorf("%s\nwidgetOf says %v watches %s, but it is not among that widget's watchers", tc.reason, wt, widget)
				}
			}
		})
	}
}

func TestFollow(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	conn := connection(t, env.URL, "conn-a")
	cases := map[string]struct {
		reason string
		// state prepares the manager: not started, started, or stopped.
		state         func(t *testing.T, m *Manager)
		widget        string
		wantFollowers int
		wantWatchers  map[string][]watch
	}{
		"BeforeStart": {
			reason: "Follow before Start does nothing: only the leader follows feeds.",
			state:  func(*testing.T, *Manager) {},
			widget: "w1",
		},
		"AfterStop": {
			reason: "Follow after Start returned does nothing.",
			state: func(t *testing.T, m *Manager) {
				t.Helper()
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if err := m.Start(ctx); err != nil {
					t.Fatal(err)
				}
			},
			widget: "w1",
		},
		"Started": {
			reason:        "Follow after Start follows the connection and remembers who watches the widget.",
			state:         start,
			widget:        "w1",
			wantFollowers: 1,
			wantWatchers:  map[string][]watch{"w1": {{watcher: watcher{kind: kindWidget, key: mrA}}}},
		},
		"NoWidgetYet": {
			reason:        "A resource whose widget name is not known yet keeps the connection followed but watches nothing.",
			state:         start,
			wantFollowers: 1,
			wantWatchers:  map[string][]watch{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewManager(logging.NewNopLogger(), metrics.New())
			tc.state(t, m)
			m.Follow(conn, kindWidget, tc.widget, mrA)

			m.mu.Lock()
			defer m.mu.Unlock()
			if got := len(m.followers); got != tc.wantFollowers {
				t.Fatalf("%s\nfollowers: want %d, got %d", tc.reason, tc.wantFollowers, got)
			}
			if tc.wantFollowers == 0 {
				return
			}
			if diff := cmp.Diff(tc.wantWatchers, m.followers[conn.Key].watchers, cmp.AllowUnexported(watch{}, watcher{}, version{})); diff != "" {
				t.Errorf("%s\nwatchers: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReap checks that followers of connections no reconcile used for longer
// than the idle timeout are stopped, and only those.
func TestReap(t *testing.T) {
	cases := map[string]struct {
		reason     string
		lastUsed   time.Duration
		wantReaped bool
		// wantWidgets is how many widgets the follower watches after the
		// test follows a second one.
		wantWidgets int
	}{
		"Idle": {
			reason:     "A follower unused for longer than the idle timeout is stopped; following again starts a new one.",
			lastUsed:   2 * time.Hour,
			wantReaped: true,
			// A new follower learns watchers afresh: only the second.
			wantWidgets: 1,
		},
		"Recent": {
			reason:      "A follower used within the idle timeout keeps running.",
			lastUsed:    time.Minute,
			wantWidgets: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(stable))
			m := NewManager(logging.NewNopLogger(), metrics.New(), WithIdleTimeout(time.Hour), WithWait(time.Second))
			start(t, m)
			conn := connection(t, env.URL, "conn-a")
			m.Follow(conn, kindWidget, "w1", mrA)

			m.mu.Lock()
			before := m.followers[conn.Key]
			before.lastUsed = time.Now().Add(-tc.lastUsed)
			m.mu.Unlock()
			m.reap()

			m.mu.Lock()
			_, kept := m.followers[conn.Key]
			m.mu.Unlock()
			if kept == tc.wantReaped {
				t.Errorf("%s\nfollower kept after reaping: want %t, got %t", tc.reason, !tc.wantReaped, kept)
			}

			m.Follow(conn, kindWidget, "w2", mrB)
			m.mu.Lock()
			defer m.mu.Unlock()
			after := m.followers[conn.Key]
			if (after != before) != tc.wantReaped {
				t.Errorf("%s\nFollow after reaping: new follower %t, want %t", tc.reason, after != before, tc.wantReaped)
			}
			if got := len(after.watchers); got != tc.wantWidgets {
				t.Errorf("%s\nwidgets watched: want %d, got %d", tc.reason, tc.wantWidgets, got)
			}
		})
	}
}

// TestIdleFollowersAreReaped checks that Start reaps idle followers by
// itself.
func TestIdleFollowersAreReaped(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithIdleTimeout(100*time.Millisecond), WithWait(time.Second))
	start(t, m)
	m.Follow(connection(t, env.URL, "conn-a"), kindWidget, "w1", mrA)
	wait.ForTrue(t, timeout, "the idle follower to be reaped", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.followers) == 0
	})
}

func TestNeedLeaderElection(t *testing.T) {
	if !NewManager(logging.NewNopLogger(), metrics.New()).NeedLeaderElection() {
		t.Error("NeedLeaderElection(): want true, only the leader may follow feeds")
	}
}

// TestFollowing checks that a connection counts as followed only while its
// feed polls successfully.
func TestFollowing(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	var broken atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/changes" && broken.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		env.HTTP.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithWait(100*time.Millisecond))
	start(t, m)
	c := connection(t, hs.URL, "conn-a")
	if m.Following(c) {
		t.Error("Following() before Follow: want false")
	}
	m.Follow(c, kindWidget, "w1", mrA)
	wait.ForTrue(t, timeout, "the connection to count as followed once its feed polled", func() bool { return m.Following(c) })
	broken.Store(true)
	wait.ForTrue(t, timeout, "the connection to stop counting while its feed fails", func() bool { return !m.Following(c) })
	broken.Store(false)
	wait.ForTrue(t, timeout, "the connection to count again once its feed recovers", func() bool { return m.Following(c) })
}

// TestRefusedTokenStopsFollower checks that a follower whose token the
// Widget API refuses stops after one refusal instead of polling on with it
// (each refusal spends the provider address's failed-authentication
// budget), and that the next Follow starts a follower with the
// connection's token of the moment.
func TestRefusedTokenStopsFollower(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	var refused atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/changes" && r.Header.Get("Authorization") != "Bearer "+apitest.TokenA {
			refused.Add(1)
		}
		env.HTTP.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithWait(100*time.Millisecond))
	start(t, m)
	expired, err := widgetapi.New(hs.URL, widgetapi.WithToken("expired-token"))
	if err != nil {
		t.Fatal(err)
	}
	// A token file's connection keeps its key when the file is rotated.
	m.Follow(&clients.Connection{Client: expired, Key: "conn-a", Endpoint: hs.URL}, kindWidget, "w1", mrA)
	wait.ForTrue(t, timeout, "the follower with a refused token to stop", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.followers) == 0
	})
	time.Sleep(500 * time.Millisecond) // two more polls, had it not stopped
	if got := refused.Load(); got != 1 {
		t.Errorf("change feed polls with the refused token: want 1, got %d", got)
	}
	rotated := connection(t, hs.URL, "conn-a")
	m.Follow(rotated, kindWidget, "w1", mrA)
	wait.ForTrue(t, timeout, "the connection to be followed with its rotated token", func() bool { return m.Following(rotated) })
}
