package ratelimit

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// fakeInner is an inner rate limiter that always answers backoff and records
// what it was asked.
type fakeInner struct {
	backoff  time.Duration
	whens    []reconcile.Request
	forgets  []reconcile.Request
	requeues int
}

func (f *fakeInner) When(req reconcile.Request) time.Duration {
	f.whens = append(f.whens, req)
	return f.backoff
}
func (f *fakeInner) Forget(req reconcile.Request)      { f.forgets = append(f.forgets, req) }
func (f *fakeInner) NumRequeues(reconcile.Request) int { return f.requeues }

var (
	reqA = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "a"}}
	reqB = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "b"}}
)

func TestLimiter(t *testing.T) {
	const backoff = 5 * time.Millisecond
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	type call struct {
		// Exactly one of these is set.
		After  time.Duration
		Wait   time.Duration // advance the clock
		When   bool
		Forget bool
		Req    reconcile.Request
	}
	type want struct {
		whens []time.Duration
		// inner are the requests the inner limiter's When was asked about.
		inner   []reconcile.Request
		forgets []reconcile.Request
	}
	cases := map[string]struct {
		reason string
		calls  []call
		want   want
	}{
		"NoHint": {
			reason: "Without a requested delay the inner limiter's backoff applies.",
			calls:  []call{{When: true, Req: reqA}},
			want:   want{whens: []time.Duration{backoff}, inner: []reconcile.Request{reqA}},
		},
		"Hint": {
			reason: "A requested delay replaces the backoff, without counting as a failure of the inner limiter.",
			calls:  []call{{After: time.Minute, Req: reqA}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{time.Minute}},
		},
		"HintIsUsedOnce": {
			reason: "A requested delay applies to the next requeue only; then the backoff is back.",
			calls:  []call{{After: time.Minute, Req: reqA}, {When: true, Req: reqA}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{time.Minute, backoff}, inner: []reconcile.Request{reqA}},
		},
		"HintCountsFromWhenItWasAsked": {
			reason: "The delay runs from when it was asked for, not from the requeue.",
			calls:  []call{{After: time.Minute, Req: reqA}, {Wait: 20 * time.Second}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{40 * time.Second}},
		},
		"ExpiredHint": {
			reason: "A delay that has already passed means retry at once (still not a failure).",
			calls:  []call{{After: time.Second, Req: reqA}, {Wait: time.Minute}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{0}},
		},
		"LongerHintWins": {
			reason: "Of two requested delays the one that ends later applies.",
			calls:  []call{{After: time.Minute, Req: reqA}, {After: time.Second, Req: reqA}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{time.Minute}},
		},
		"HintsArePerRequest": {
			reason: "A delay asked for one request does not affect another.",
			calls:  []call{{After: time.Minute, Req: reqA}, {When: true, Req: reqB}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{backoff, time.Minute}, inner: []reconcile.Request{reqB}},
		},
		"ForgetClearsHint": {
			reason: "Forget (a successful reconcile) drops a pending delay and resets the inner backoff.",
			calls:  []call{{After: time.Minute, Req: reqA}, {Forget: true, Req: reqA}, {When: true, Req: reqA}},
			want:   want{whens: []time.Duration{backoff}, inner: []reconcile.Request{reqA}, forgets: []reconcile.Request{reqA}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inner := &fakeInner{backoff: backoff, requeues: 3}
			now := start
			l := New(inner)
			l.now = func() time.Time { return now }
			var whens []time.Duration
			for _, c := range tc.calls {
				switch {
				case c.After > 0:
					l.After(c.Req, c.After)
				case c.Wait > 0:
					now = now.Add(c.Wait)
				case c.When:
					whens = append(whens, l.When(c.Req))
				case c.Forget:
					l.Forget(c.Req)
				}
			}
			if diff := cmp.Diff(tc.want.whens, whens); diff != "" {
				t.Errorf("%s\nWhen(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inner, inner.whens); diff != "" {
				t.Errorf("%s\ninner When(...) calls: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.forgets, inner.forgets); diff != "" {
				t.Errorf("%s\ninner Forget(...) calls: -want, +got:\n%s", tc.reason, diff)
			}
			if got := l.NumRequeues(reqA); got != 3 {
				t.Errorf("%s\nNumRequeues(...): want the inner limiter's 3, got %d", tc.reason, got)
			}
		})
	}
}
