package mrsetup

import (
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

func TestWakeUp(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason string
		// poll is what the poll hook returns; 10 minutes when zero.
		poll time.Duration
		wake time.Time
		want time.Duration
	}{
		"Nothing": {reason: "A resource with nothing scheduled waits its poll.", want: 10 * time.Minute},
		"Sooner":  {reason: "A rotation due in 3 minutes is reconciled in 3 minutes, not at the next poll.", wake: now.Add(3 * time.Minute), want: 3 * time.Minute},
		"Later":   {reason: "A rotation due after the next poll waits for the poll.", wake: now.Add(time.Hour), want: 10 * time.Minute},
		"Overdue": {reason: "An overdue event is retried after a second, not at once in a loop.", wake: now.Add(-time.Hour), want: time.Second},
		"JustNow": {reason: "An event due in half a second waits a second.", wake: now.Add(500 * time.Millisecond), want: time.Second},
		"NegativePoll": {
			reason: "A poll hook that answers a negative wait (no requeue) does not drop a rotation due in 3 minutes.",
			poll:   -20 * time.Second, wake: now.Add(3 * time.Minute), want: 3 * time.Minute,
		},
		"ShortPoll": {
			reason: "A poll due before the rotation comes first; the rotation is seen at a later reconcile.",
			poll:   10 * time.Second, wake: now.Add(3 * time.Minute), want: 10 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			poll := func(resource.Managed, time.Duration) time.Duration {
				if tc.poll != 0 {
					return tc.poll
				}
				return 10 * time.Minute
			}
			hook := wakeUp(poll, func(resource.Managed) time.Time { return tc.wake }, func() time.Time { return now })
			if got := hook(widget(nil), 10*time.Minute); got != tc.want {
				t.Errorf("%s\nwait: want %s, got %s", tc.reason, tc.want, got)
			}
		})
	}
}
