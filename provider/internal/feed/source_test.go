package feed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestSource checks that the source a controller watches turns feed events
// into reconcile requests for the resource.
func TestSource(t *testing.T) {
	m := NewManager(logging.NewNopLogger(), metrics.New())
	src := m.Source(kindWidget)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := src.Start(ctx, q); err != nil {
		t.Fatalf("Start: %v", err)
	}
	m.mu.Lock()
	ch := m.sources[kindWidget]
	m.mu.Unlock()
	ch <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: mrA.Namespace, Name: mrA.Name}}}

	queued := make(chan reconcile.Request, 1)
	go func() {
		if r, shutdown := q.Get(); !shutdown {
			queued <- r
		}
	}()
	var got reconcile.Request
	select {
	case got = <-queued:
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for a queued request", timeout)
	}
	if diff := cmp.Diff(reconcile.Request{NamespacedName: mrA}, got); diff != "" {
		t.Errorf("queued request: -want, +got:\n%s", diff)
	}
}

// TestSourceWhileFollowing checks that a controller may register its source
// while followers are delivering changes. With safe-start, controllers are
// set up when their CRDs appear, which can be long after the feed manager
// started and other controllers' resources made it follow connections.
func TestSourceWhileFollowing(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	api := env.Client(t, apitest.TokenA)
	create(t, api, "w1")
	fs := newFeedServer(t, env, false)

	m := NewManager(logging.NewNopLogger(), metrics.New(), WithWait(time.Second))
	widgets := channel(m, kindWidget)
	start(t, m)
	m.Follow(connection(t, fs.url, "conn-a"), kindWidget, "w1", mrA)
	fs.waitPolled(t)

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m.Source(fmt.Sprintf("Late%d.kind", i%8))
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range 20 {
		describe(t, api, "w1", fmt.Sprintf("change %d", i))
		if diff := cmp.Diff(mrA, receive(t, widgets)); diff != "" {
			t.Errorf("event after change %d: -want, +got:\n%s", i, diff)
		}
	}
	close(stop)
	<-done
}

func TestVersionCovers(t *testing.T) {
	ready, prov := widgetapi.StateReady, widgetapi.StateProvisioning
	cases := map[string]struct {
		reason string
		seen   version
		change *widgetapi.Change
		want   bool
	}{
		"Unknown": {
			reason: "A watcher that has seen nothing yet is queued for every change.",
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetCreated, Generation: 1, State: prov},
		},
		"Resync": {
			reason: "A resync (no change) queues everyone.",
			seen:   version{generation: 3, state: ready},
		},
		"OwnCreate": {
			reason: "The echo of the watcher's own create is skipped.",
			seen:   version{generation: 1, state: prov},
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetCreated, Generation: 1, State: prov},
			want:   true,
		},
		"OwnUpdate": {
			reason: "The echo of the watcher's own update is skipped.",
			seen:   version{generation: 5, state: ready},
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetUpdated, Generation: 5, State: ready},
			want:   true,
		},
		"Older": {
			reason: "A change older than what the watcher read is skipped.",
			seen:   version{generation: 5, state: ready},
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetUpdated, Generation: 4, State: ready},
			want:   true,
		},
		"NewerGeneration": {
			reason: "An out-of-band update (a generation the watcher has not seen) is queued.",
			seen:   version{generation: 5, state: ready},
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetUpdated, Generation: 6, State: ready},
		},
		"NewState": {
			reason: "A state change at the generation the watcher saw (Provisioning to Ready) is queued.",
			seen:   version{generation: 1, state: prov},
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetState, Generation: 1, State: ready},
		},
		"Deleted": {
			reason: "A deletion is always queued, whatever the watcher saw.",
			seen:   version{generation: 5, state: ready},
			change: &widgetapi.Change{Type: widgetapi.ChangeWidgetDeleted, Generation: 5},
		},
		"KeyChange": {
			reason: "Key changes are always queued: the version says nothing about keys.",
			seen:   version{generation: 5, state: ready},
			change: &widgetapi.Change{Type: widgetapi.ChangeKeyCreated, Generation: 5, State: ready},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.seen.covers(tc.change); got != tc.want {
				t.Errorf("%s\ncovers: want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}

// TestSeen checks that a resource that has already read or written a
// widget's version is not queued for that version's change, while other
// resources, other kinds and newer versions still are.
func TestSeen(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	api := env.Client(t, apitest.TokenA)
	create(t, api, "w1", "w2", "w3")
	fs := newFeedServer(t, env, true)

	met := metrics.New()
	m := NewManager(logging.NewNopLogger(), met, WithWait(time.Second))
	widgets, keys := channel(m, kindWidget), channel(m, kindKey)
	start(t, m)
	conn := connection(t, fs.url, "conn-a")
	m.Follow(conn, kindWidget, "w1", mrA)
	m.Follow(conn, kindKey, "w1", keyA)
	m.Follow(conn, kindWidget, "w2", mrB)
	m.Follow(conn, kindWidget, "w3", mrC)
	fs.waitPolled(t)

	// mrA updates w1 itself and records what the API returned; w2 is
	// changed by someone else.
	desc := "mine"
	w, err := api.PatchWidget(t.Context(), "w1", widgetapi.PatchWidgetRequest{Description: &desc})
	if err != nil {
		t.Fatal(err)
	}
	m.Seen(conn, kindWidget, "w1", mrA, w.Generation, w.State)
	m.Seen(conn, kindWidget, "unwatched", mrA, 9, w.State)                     // no watcher: ignored
	m.Seen(connection(t, fs.url, "conn-b"), kindWidget, "w1", mrA, 9, w.State) // no follower: ignored
	describe(t, api, "w2", "theirs")
	fs.release()

	if got := receive(t, widgets); got != mrB {
		t.Fatalf("first Widget request queued: want %v, got %v", mrB, got)
	}
	if got := receive(t, keys); got != keyA {
		t.Fatalf("WidgetKey request queued: want %v, got %v", keyA, got)
	}
	describe(t, api, "w3", "sentinel")
	if got := receive(t, widgets); got != mrC {
		t.Fatalf("after the sentinel: want %v, got %v (mrA must not be queued for its own update)", mrC, got)
	}
	if got := append(drain(widgets), drain(keys)...); len(got) != 0 {
		t.Errorf("unexpected requests queued: %v", got)
	}
	if got := counter(t, met.FeedSkips); got != 1 {
		t.Errorf("feed skips counted: want 1, got %v", got)
	}

	// A change mrA has not seen (someone else's, a newer generation) is
	// queued again.
	describe(t, api, "w1", "theirs")
	if got := receive(t, widgets); got != mrA {
		t.Errorf("after an out-of-band change: want %v, got %v", mrA, got)
	}
}

// A change the feed reports forgets the changed widget in the memory of
// recent widgets before the resources that follow it are queued, and only
// that widget of that connection.
func TestChangeForgetsRecentWidget(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(stable))
	api := env.Client(t, apitest.TokenA)
	create(t, api, "w1", "w2")
	fs := newFeedServer(t, env, false)

	recent := clients.NewRecentWidgets(time.Hour)
	m := NewManager(logging.NewNopLogger(), metrics.New(), WithWait(time.Second), WithRecentWidgets(recent))
	widgets := channel(m, kindWidget)
	start(t, m)
	c := connection(t, fs.url, "conn-a")
	m.Follow(c, kindWidget, "w1", mrA)
	fs.waitPolled(t)

	for _, r := range []struct{ conn, name string }{{"conn-a", "w1"}, {"conn-a", "w2"}, {"conn-b", "w1"}} {
		recent.Remember(r.conn, &widgetapi.Widget{Name: r.name})
	}
	describe(t, api, "w1", "changed")
	receive(t, widgets)
	if _, ok := recent.Recall("conn-a", "w1"); ok {
		t.Error("w1 is still remembered after the feed reported it changed")
	}
	if _, ok := recent.Recall("conn-a", "w2"); !ok {
		t.Error("w2, which did not change, was forgotten")
	}
	if _, ok := recent.Recall("conn-b", "w1"); !ok {
		t.Error("another connection's w1 was forgotten")
	}
}
