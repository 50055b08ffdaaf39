package widgetapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestFollowerPacing checks that a follower paces itself against a server
// that answers long polls at once - with nothing, with a change every time,
// or with feed_expired - as a server a tenant runs may: today's limits are
// four polls a second and exponential backoff from 200ms after early empty
// and expired answers.
func TestFollowerPacing(t *testing.T) {
	const run = time.Second
	cases := map[string]struct {
		reason string
		// answer writes the answer to poll n (1-based; after=latest polls
		// are answered with latestSeq 1 and not counted).
		answer      func(w http.ResponseWriter, n int64)
		maxPolls    int64
		maxResyncs  int64
		minResyncs  int64
		minHandled  int64
		wantHandled bool
	}{
		"EmptyAtOnce": {
			reason:   "Empty answers that come back at once back off: 200ms, 400ms, 800ms...",
			answer:   func(w http.ResponseWriter, _ int64) { fmt.Fprint(w, `{"changes":[],"latestSeq":1}`) },
			maxPolls: 5,
		},
		"ChangeAtOnce": {
			reason: "A change in every answer is at most one poll per MinInterval (250ms).",
			answer: func(w http.ResponseWriter, n int64) {
				fmt.Fprintf(w, `{"changes":[{"seq":%d,"type":"widget.updated","widget":"w","generation":%d,"time":"2026-01-01T00:00:00Z"}],"latestSeq":%d}`, n+1, n+1, n+1)
			},
			maxPolls: 6, minHandled: 2,
		},
		"ExpiredAtOnce": {
			reason: "A feed that is always expired resyncs with exponential backoff, not in a loop.",
			answer: func(w http.ResponseWriter, _ int64) {
				w.WriteHeader(http.StatusGone)
				fmt.Fprint(w, `{"type":"x","title":"Gone","status":410,"code":"feed_expired","latestSeq":1}`)
			},
			maxPolls: 6, maxResyncs: 5, minResyncs: 1,
		},
		"ExpiredEveryOtherAnswer": {
			reason: "Answers in between do not reset the resync backoff.",
			answer: func(w http.ResponseWriter, n int64) {
				if n%2 == 0 {
					fmt.Fprintf(w, `{"changes":[],"latestSeq":%d}`, n+10)
					return
				}
				w.WriteHeader(http.StatusGone)
				fmt.Fprint(w, `{"type":"x","title":"Gone","status":410,"code":"feed_expired","latestSeq":1}`)
			},
			maxPolls: 8, maxResyncs: 4, minResyncs: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var polls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Query().Get("after") == "latest" {
					fmt.Fprint(w, `{"changes":[],"latestSeq":1}`)
					return
				}
				tc.answer(w, polls.Add(1))
			}))
			t.Cleanup(srv.Close)
			c, err := widgetapi.New(srv.URL, widgetapi.WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			var handled, resyncs atomic.Int64
			f := c.NewFollower(func(context.Context, widgetapi.Change) { handled.Add(1) })
			f.OnResync = func(context.Context) { resyncs.Add(1) }
			runCtx, cancel := context.WithTimeout(t.Context(), run)
			defer cancel()
			f.Run(runCtx, widgetapi.FromLatest)
			t.Logf("in %s: %d polls, %d resyncs, %d changes handled", run, polls.Load(), resyncs.Load(), handled.Load())

			if got := polls.Load(); got > tc.maxPolls || got < 1 {
				t.Errorf("%s\npolls in %s: want 1 to %d, got %d", tc.reason, run, tc.maxPolls, got)
			}
			if got := resyncs.Load(); got > tc.maxResyncs || got < tc.minResyncs {
				t.Errorf("%s\nresyncs in %s: want %d to %d, got %d", tc.reason, run, tc.minResyncs, tc.maxResyncs, got)
			}
			if got := handled.Load(); got < tc.minHandled {
				t.Errorf("%s\nchanges handled in %s: want at least %d, got %d", tc.reason, run, tc.minHandled, got)
			}
		})
	}
}

// TestFollowerAbandonsHeldPolls checks that a poll the server holds longer
// than Wait plus Slack is given up and made again, rather than stopping the
// feed for good.
func TestFollowerAbandonsHeldPolls(t *testing.T) {
	var polls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") == "latest" {
			fmt.Fprint(w, `{"changes":[],"latestSeq":1}`)
			return
		}
		polls.Add(1)
		<-r.Context().Done() // held until the client gives up
	}))
	t.Cleanup(srv.Close)
	c, err := widgetapi.New(srv.URL, widgetapi.WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	f := c.NewFollower(func(context.Context, widgetapi.Change) {})
	f.Wait, f.Slack = 100*time.Millisecond, 100*time.Millisecond
	runCtx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	f.Run(runCtx, widgetapi.FromLatest)
	if got := polls.Load(); got < 2 {
		t.Errorf("polls in 1.5s when each is held for ever and abandoned after 200ms: want at least 2, got %d", got)
	}
}
