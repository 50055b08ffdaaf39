// Package wait polls conditions for tests and test tools: the one way this
// project waits for something to become true, or to stay true.
package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Interval is how often For and Consistently check.
const Interval = 50 * time.Millisecond

// Poll calls fn every interval until it reports done or fails, or ctx is
// done. It returns fn's error, or ctx's when ctx ends first.
func Poll(ctx context.Context, interval time.Duration, fn func(ctx context.Context) (done bool, err error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := fn(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Until is Poll for a condition that cannot fail: it returns nil once cond
// holds, or ctx's error when ctx ends first.
func Until(ctx context.Context, interval time.Duration, cond func(ctx context.Context) bool) error {
	return Poll(ctx, interval, func(ctx context.Context) (bool, error) { return cond(ctx), nil })
}

// For calls fn until it returns nil and returns how long that took. After
// timeout it fails t, naming what it waited for and fn's last error: the
// state that never became what the test wanted.
func For(t testing.TB, timeout time.Duration, what string, fn func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := fn()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s; last state: %v", timeout, what, err)
		}
		time.Sleep(Interval)
	}
}

// ForTrue is For for a condition that has no state to report: it fails t
// after timeout unless cond holds.
func ForTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return For(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// errNotYet is ForTrue's last state: the condition did not hold.
var errNotYet = errors.New("not yet")

// Consistently calls fn for d and fails t the first time it returns an
// error: for what must stay true (nothing is created, nothing changes).
func Consistently(t testing.TB, d time.Duration, what string, fn func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(Interval) {
		if err := fn(); err != nil {
			t.Fatalf("%s stopped holding: %v", what, err)
		}
	}
}
