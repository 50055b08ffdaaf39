package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]struct {
		reason string
		// results are fn's answers, in turn; the last repeats.
		results []error
		done    int // the call (1-based) that reports done; 0 for never
		timeout time.Duration
		want    error
		calls   int
	}{
		"DoneAtOnce":  {reason: "A condition that holds returns at once.", done: 1, timeout: time.Second, calls: 1},
		"DoneLater":   {reason: "Poll calls again until the condition holds.", done: 3, timeout: 10 * time.Second, calls: 3},
		"Fails":       {reason: "An error ends the wait with that error.", results: []error{nil, errBoom}, timeout: time.Second, want: errBoom, calls: 2},
		"NeverHolds":  {reason: "A condition that never holds ends with ctx's error.", timeout: 30 * time.Millisecond, want: context.DeadlineExceeded},
		"Interrupted": {reason: "An error on the first call is returned without waiting.", results: []error{errBoom}, timeout: time.Second, want: errBoom, calls: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			calls := 0
			err := Poll(ctx, time.Millisecond, func(context.Context) (bool, error) {
				calls++
				var err error
				if len(tc.results) > 0 {
					err = tc.results[min(calls, len(tc.results))-1]
				}
				return tc.done > 0 && calls >= tc.done, err
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("%s\nPoll(...): want error %v, got %v", tc.reason, tc.want, err)
			}
			if tc.calls > 0 && calls != tc.calls {
				t.Errorf("%s\nPoll(...): want %d calls, got %d", tc.reason, tc.calls, calls)
			}
		})
	}
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func run(fn func(tb testing.TB)) (failed bool) {
	r := &recorder{}
	defer func() {
		if v := recover(); v != nil && v != any(r) {
			panic(v)
		}
		failed = r.failed != ""
	}()
	fn(r)
	return false
}

func TestFor(t *testing.T) {
	calls := 0
	if run(func(tb testing.TB) {
		For(tb, time.Second, "the third call", func() error {
			if calls++; calls < 3 {
				return errNotYet
			}
			return nil
		})
	}) {
		t.Errorf("For(...): failed although the condition held on the third call")
	}
	if calls != 3 {
		t.Errorf("For(...): want 3 calls, got %d", calls)
	}
	if !run(func(tb testing.TB) { For(tb, 20*time.Millisecond, "never", func() error { return errNotYet }) }) {
		t.Errorf("For(...): a condition that never holds must fail the test")
	}
}

func TestConsistently(t *testing.T) {
	if run(func(tb testing.TB) { Consistently(tb, 20*time.Millisecond, "always", func() error { return nil }) }) {
		t.Errorf("Consistently(...): failed although the condition always held")
	}
	calls := 0
	if !run(func(tb testing.TB) {
		Consistently(tb, time.Second, "twice", func() error {
			if calls++; calls > 2 {
				return errNotYet
			}
			return nil
		})
	}) {
		t.Errorf("Consistently(...): a condition that stops holding must fail the test")
	}
}

func TestForTrue(t *testing.T) {
	calls := 0
	if run(func(tb testing.TB) {
		ForTrue(tb, time.Second, "the second call", func() bool { calls++; return calls == 2 })
	}) {
		t.Errorf("ForTrue(...): failed although the condition held on the second call")
	}
	if !run(func(tb testing.TB) { ForTrue(tb, 20*time.Millisecond, "never", func() bool { return false }) }) {
		t.Errorf("ForTrue(...): a condition that never holds must fail the test")
	}
}

func TestUntil(t *testing.T) {
	calls := 0
	if err := Until(context.Background(), time.Millisecond, func(context.Context) bool { calls++; return calls == 3 }); err != nil {
		t.Errorf("Until(...): %v, want nil once the condition holds", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Until(ctx, time.Millisecond, func(context.Context) bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Until(...): %v, want the context's deadline when the condition never holds", err)
	}
}
