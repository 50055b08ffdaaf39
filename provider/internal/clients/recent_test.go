package clients

import (
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

func TestRecentWidgets(t *testing.T) {
	now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	w := &widgetapi.Widget{Name: "web", Labels: map[string]string{"team": "a"}, Endpoint: "https://web"}
	type step struct {
		// do is remember, forget, forget-connection or wait.
		do   string
		conn string
		wait time.Duration
	}
	cases := map[string]struct {
		reason string
		poll   time.Duration
		steps  []step
		// recall is what Recall("a", "web") finds after the steps.
		recall bool
	}{
		"Remembered": {
			reason: "A widget read moments ago is recalled.",
			poll:   10 * time.Minute,
			steps:  []step{{do: "remember", conn: "a"}, {do: "wait", wait: 29 * time.Second}},
			recall: true,
		},
		"Expired": {
			reason: "A widget is remembered for at most 30 s.",
			poll:   10 * time.Minute,
			steps:  []step{{do: "remember", conn: "a"}, {do: "wait", wait: 30 * time.Second}},
		},
		"HalfAPoll": {
			reason: "A widget is remembered for at most half a poll interval, so every poll reads it.",
			poll:   20 * time.Second,
			steps:  []step{{do: "remember", conn: "a"}, {do: "wait", wait: 10 * time.Second}},
		},
		"OtherConnection": {
			reason: "A widget read through another connection (another Widget API project or credentials) is not this connection's.",
			poll:   10 * time.Minute,
			steps:  []step{{do: "remember", conn: "b"}},
		},
		"Forgotten": {
			reason: "A widget the change feed reports changed is forgotten.",
			poll:   10 * time.Minute,
			steps:  []step{{do: "remember", conn: "a"}, {do: "forget", conn: "a"}},
		},
		"ConnectionForgotten": {
			reason: "A resync of the change feed forgets the connection's widgets.",
			poll:   10 * time.Minute,
			steps:  []step{{do: "remember", conn: "a"}, {do: "remember", conn: "b"}, {do: "forget-connection", conn: "a"}},
		},
		"OtherConnectionForgotten": {
			reason: "Forgetting another connection's widgets leaves this one's.",
			poll:   10 * time.Minute,
			steps:  []step{{do: "remember", conn: "a"}, {do: "forget-connection", conn: "b"}},
			recall: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewRecentWidgets(tc.poll)
			at := now
			r.m.SetClock(func() time.Time { return at })
			for _, s := range tc.steps {
				switch s.do {
				case "remember":
					r.Remember(s.conn, w)
				case "forget":
					r.Forget(s.conn, w.Name)
				case "forget-connection":
					r.ForgetConnection(s.conn)
				case "wait":
					at = at.Add(s.wait)
				}
			}
			got, ok := r.Recall("a", "web")
			if ok != tc.recall {
				t.Fatalf("%s\nRecall(...): want found %t, got %t", tc.reason, tc.recall, ok)
			}
			if ok {
				if diff := cmp.Diff(w, got); diff != "" {
					t.Errorf("%s\nRecall(...): -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

// What a caller does with a remembered widget changes neither the memory
// nor the widget it was given, and a nil memory remembers nothing.
func TestRecentWidgetsCopies(t *testing.T) {
	r := NewRecentWidgets(time.Hour)
	w := &widgetapi.Widget{Name: "web", Labels: map[string]string{"team": "a"}}
	r.Remember("a", w)
	w.Labels["team"] = "b"
	got, _ := r.Recall("a", "web")
	got.Labels["team"] = "c"
	again, _ := r.Recall("a", "web")
	if again.Labels["team"] != "a" {
		t.Errorf("the remembered widget's labels changed to %v", again.Labels)
	}
	var none *RecentWidgets
	none.Remember("a", w)
	none.Forget("a", "web")
	none.ForgetConnection("a")
	if _, ok := none.Recall("a", "web"); ok {
		t.Error("a nil memory recalled a widget")
	}
}

// A session's RecentWidget answers from the memory of the session's own
// reads, with the feed told of the version it acts on; GetWidget always
// reads, and a widget that is gone is forgotten.
func TestSessionRecentWidget(t *testing.T) {
	env := apitest.Start(t)
	seed := env.Client(t, apitest.TokenA)
	if _, err := seed.CreateWidget(t.Context(), widgetapi.CreateWidgetRequest{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	var mu sync.Mutex
	var calls []string
	resolver := NewResolver(fakes.NewKube(nsPC(env.URL), tokenSecret(testNamespace, apitest.TokenA)),
		WithObserver(func(op string, _ int, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, op)
		}))
	feeds := &seenFeed{}
	g := &Sessions{Resolver: resolver, Throttle: NewThrottle(), Recent: NewRecentWidgets(time.Hour), Feeds: feeds}
	s, err := g.Open(t.Context(), nsMR(ref), &fakes.Delayer{}, "WidgetKey.kind", "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecentWidget(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecentWidget(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWidget(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := seed.DeleteWidget(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, seed, "web")
	if _, err := s.GetWidget(t.Context(), "web"); !widgetapi.IsNotFound(err) {
		t.Fatalf("GetWidget(gone): want not found, got %v", err)
	}
	if _, err := s.RecentWidget(t.Context(), "web"); !widgetapi.IsNotFound(err) {
		t.Errorf("RecentWidget(gone) after GetWidget found it gone: want not found, got %v", err)
	}
	if diff := cmp.Diff([]string{"get widget", "get widget", "get widget", "get widget"}, calls); diff != "" {
		t.Errorf("Widget API calls: -want, +got:\n%s", diff)
	}
	if feeds.seen != 3 {
		t.Errorf("the feed was told of %d versions seen, want 3 (two reads and one recall)", feeds.seen)
	}
}

// seenFeed is a Follower that counts Seen calls.
type seenFeed struct{ seen int }

func (f *seenFeed) Follow(*Connection, string, string, types.NamespacedName) {}
func (f *seenFeed) Following(*Connection) bool                               { return true }
func (f *seenFeed) Seen(*Connection, string, string, types.NamespacedName, int64, widgetapi.State) {
	f.seen++
}

func waitGone(t *testing.T, c *widgetapi.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.GetWidget(t.Context(), name); widgetapi.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("widget %s still exists after 30 s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
