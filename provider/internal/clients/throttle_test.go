package clients

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is a Throttle clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestThrottle() (*Throttle, *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return &Throttle{now: clk.now, conns: map[string]*pace{}}, clk
}

const key = "https://widgets.example.com#0123456789ab"

func TestThrottleRetryAfter(t *testing.T) {
	cases := map[string]struct {
		reason   string
		throttle func(th *Throttle, clk *fakeClock)
		// Every Admit must be within [min, max].
		min, max time.Duration
	}{
		"NeverThrottled": {
			reason:   "A connection that never got a 429 is not limited.",
			throttle: func(*Throttle, *fakeClock) {},
		},
		"OtherConnection": {
			reason:   "A 429 limits only its own connection.",
			throttle: func(th *Throttle, _ *fakeClock) { th.Throttled("other", time.Minute) },
		},
		"RetryAfter": {
			reason:   "During Retry-After every call waits at least until it ends, and at most half as long again (jitter).",
			throttle: func(th *Throttle, _ *fakeClock) { th.Throttled(key, 10*time.Second) },
			min:      10 * time.Second,
			max:      15*time.Second + time.Millisecond,
		},
		"RetryAfterPartlyElapsed": {
			reason: "The wait is what is left of Retry-After, plus jitter of at most half of that.",
			throttle: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, 10*time.Second)
				clk.advance(4 * time.Second)
			},
			min: 6 * time.Second,
			max: 9*time.Second + time.Millisecond,
		},
		"LongerRetryAfterWins": {
			reason: "A later 429 with a shorter Retry-After does not shorten the wait.",
			throttle: func(th *Throttle, _ *fakeClock) {
				th.Throttled(key, 10*time.Second)
				th.Throttled(key, time.Second)
			},
			min: 10 * time.Second,
			max: 15*time.Second + time.Millisecond,
		},
		"LaterRetryAfterExtends": {
			reason: "A later 429 with a Retry-After that ends later extends the wait.",
			throttle: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				clk.advance(500 * time.Millisecond)
				th.Throttled(key, 10*time.Second)
			},
			min: 10 * time.Second,
			max: 15*time.Second + time.Millisecond,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			th, clk := newTestThrottle()
			tc.throttle(th, clk)
			seen := map[time.Duration]bool{}
			for range 200 {
				d := th.Admit(key)
				seen[d] = true
				if d < tc.min || d > tc.max {
					t.Fatalf("%s\nAdmit(): got %s, want within [%s, %s]", tc.reason, d, tc.min, tc.max)
				}
			}
			if tc.max > 0 && len(seen) < 2 {
				t.Errorf("%s\nAdmit(): 200 calls all waited %v; want them spread by jitter", tc.reason, seen)
			}
		})
	}
}

func TestThrottleRate(t *testing.T) {
	succeed := func(th *Throttle, n int) {
		for range n {
			th.Succeeded(key)
		}
	}
	cases := map[string]struct {
		reason string
		events func(th *Throttle, clk *fakeClock)
		// want are the results of successive Admit calls at the same
		// instant, after events.
		want          []time.Duration
		wantUnlimited bool
	}{
		"FirstThrottle": {
			reason: "After the first 429's Retry-After, calls go at 4/s: one now, the next in 250ms.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
			},
			want: []time.Duration{0, 250 * time.Millisecond, 250 * time.Millisecond},
		},
		"BurstOf429s": {
			reason: "429s within a second of the last lowering are one signal: the rate is not halved again.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				clk.advance(999 * time.Millisecond)
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
			},
			want: []time.Duration{0, 250 * time.Millisecond},
		},
		"429ASecondLater": {
			reason: "A 429 a second after the last lowering halves the rate to 2/s.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
			},
			want: []time.Duration{0, 500 * time.Millisecond},
		},
		"MinimumRate": {
			reason: "Halving stops at 0.5/s: a call every 2s at the slowest.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				for range 10 {
					clk.advance(time.Second)
					th.Throttled(key, time.Second)
				}
				clk.advance(time.Second)
			},
			want: []time.Duration{0, 2 * time.Second},
		},
		"SuccessesRaiseTheRate": {
			reason: "Each success adds 0.05/s: 20 of them take 4/s to 5/s.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
				succeed(th, 20)
			},
			want: []time.Duration{0, 200 * time.Millisecond},
		},
		"Recovery": {
			reason: "Once successes raise the rate above 50/s the connection is no longer limited at all.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
				succeed(th, 1000)
			},
			want:          []time.Duration{0, 0, 0},
			wantUnlimited: true,
		},
		"ThrottleAfterRecovery": {
			reason: "A 429 after recovery starts again at 4/s, not at the old rate.",
			events: func(th *Throttle, clk *fakeClock) {
				th.Throttled(key, time.Second)
				for range 3 {
					clk.advance(time.Second)
					th.Throttled(key, time.Second)
				}
				clk.advance(time.Second)
				succeed(th, 2000)
				th.Throttled(key, time.Second)
				clk.advance(time.Second)
			},
			want: []time.Duration{0, 250 * time.Millisecond},
		},
		"SuccessWithoutThrottle": {
			reason:        "Successes on a connection that was never throttled change nothing.",
			events:        func(th *Throttle, _ *fakeClock) { succeed(th, 10) },
			want:          []time.Duration{0, 0},
			wantUnlimited: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			th, clk := newTestThrottle()
			tc.events(th, clk)
			got := make([]time.Duration, 0, len(tc.want))
			for range tc.want {
				got = append(got, th.Admit(key).Round(time.Millisecond))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAdmit() calls: -want, +got:\n%s", tc.reason, diff)
			}
			if _, limited := th.conns[key]; limited == tc.wantUnlimited {
				t.Errorf("%s\nconnection tracked: got %t, want %t", tc.reason, limited, !tc.wantUnlimited)
			}
		})
	}
}

// TestThrottleForgetsStaleConnections checks that the paces of connections
// throttled long ago and not used since are forgotten, so the Throttle does
// not grow with every token or endpoint ever throttled.
func TestThrottleForgetsStaleConnections(t *testing.T) {
	th, clk := newTestThrottle()
	for i := range 1000 {
		th.Throttled(fmt.Sprintf("old-%d", i), time.Second)
	}
	clk.advance(StaleThrottle + time.Minute)
	for i := range 100 {
		th.Throttled(fmt.Sprintf("new-%d", i), time.Second)
	}
	if got := len(th.conns); got > 200 {
		t.Errorf("paces after 1,000 stale and 100 fresh throttled connections: want at most 200, got %d", got)
	}
	if th.Admit("new-0") == 0 {
		t.Errorf("a freshly throttled connection was forgotten")
	}
}
