package widgetapi_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestFollower(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = time.Hour }))
	c := env.Client(t, apitest.TokenA)
	mustCreate(t, c, "before")

	var mu sync.Mutex
	var got []widgetapi.Change
	f := c.NewFollower(func(_ context.Context, ch widgetapi.Change) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ch)
	})
	f.Wait = time.Second
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan int64)
	go func() { done <- f.Run(runCtx, 0) }()

	mustCreate(t, c, "during")
	mustCreate(t, env.Client(t, apitest.TokenB), "other-project")
	if _, err := c.PatchWidget(ctx(t), "during", widgetapi.PatchWidgetRequest{Description: ptr("x")}); err != nil {
		t.Fatal(err)
	}
	wait.ForTrue(t, 10*time.Second, "follower to see the update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Type == widgetapi.ChangeWidgetUpdated
	})
	cancel()
	last := <-done

	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("changes out of order: %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
	var seen []string
	for _, ch := range got {
		if ch.Type == widgetapi.ChangeWidgetCreated {
			seen = append(seen, ch.Widget)
		}
	}
	if diff := cmp.Diff([]string{"before", "during"}, seen); diff != "" {
		t.Errorf("created widgets seen: -want, +got:\n%s", diff)
	}
	if last != got[len(got)-1].Seq {
		t.Errorf("Run returned %d, want the last delivered seq %d", last, got[len(got)-1].Seq)
	}

	// Resume: only changes after `last` arrive.
	mustCreate(t, c, "after-restart")
	l, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: last})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Changes) != 1 || l.Changes[0].Widget != "after-restart" {
		t.Errorf("resume after %d: got %+v, want only the after-restart create", last, l.Changes)
	}
}

func TestFollowerResyncsWhenExpired(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.FeedRetention = 2; o.ProvisionDelay = time.Hour }))
	c := env.Client(t, apitest.TokenA)
	for i := range 4 {
		mustCreate(t, c, fmt.Sprintf("e%d", i))
	}
	var resyncs atomic.Int32
	var delivered atomic.Int32
	f := c.NewFollower(func(context.Context, widgetapi.Change) { delivered.Add(1) })
	f.Wait = 200 * time.Millisecond
	f.OnResync = func(context.Context) { resyncs.Add(1) }
	runCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan int64)
	go func() { done <- f.Run(runCtx, 0) }()
	wait.ForTrue(t, 10*time.Second, "a resync", func() bool { return resyncs.Load() == 1 })
	mustCreate(t, c, "fresh")
	wait.ForTrue(t, 10*time.Second, "the new change", func() bool { return delivered.Load() == 1 })
	cancel()
	if last := <-done; last != 5 {
		t.Errorf("Run returned %d, want 5", last)
	}
}

func TestLongPollWaits(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = time.Hour }))
	c := env.Client(t, apitest.TokenA)
	head, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: widgetapi.FromLatest})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *widgetapi.ChangeList, 1)
	go func() {
		l, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: head.LatestSeq, Wait: 20 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case l := <-got:
		t.Fatalf("long poll answered before any change: %+v", l)
	case <-time.After(200 * time.Millisecond):
	}
	mustCreate(t, c, "wake")
	select {
	case l := <-got:
		if len(l.Changes) != 1 || l.Changes[0].Widget != "wake" {
			t.Errorf("long poll: got %+v, want the wake create", l.Changes)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll was not woken by a change")
	}
}
