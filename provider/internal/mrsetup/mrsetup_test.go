package mrsetup

import (
	"errors"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestPollInterval(t *testing.T) {
	ready := widget(nil)
	ready.SetConditions(xpv2.Available())
	resizing := widget(nil)
	resizing.SetConditions(xpv2.Unavailable().WithMessage("resizing"))
	deleting := widget(nil)
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	cases := map[string]struct {
		reason   string
		mg       *nsv1beta1.Widget
		poll     time.Duration
		jitter   time.Duration
		floor    time.Duration
		min, max time.Duration
	}{
		"Ready": {
			reason: "A Ready resource waits the poll interval, spread by the jitter.",
			mg:     ready, poll: 10 * time.Minute, jitter: time.Minute, floor: 10 * time.Second,
			min: 9 * time.Minute, max: 11 * time.Minute,
		},
		"NoConditionYet": {
			reason: "A resource that is not Ready yet is polled again within TransitionPoll (10s), with a tenth of it as jitter at most, never below the floor.",
			mg:     widget(nil), poll: 10 * time.Minute, jitter: time.Minute, floor: 10 * time.Second,
			min: 10 * time.Second, max: 11 * time.Second,
		},
		"Resizing": {
			reason: "A widget being resized is polled again within TransitionPoll.",
			mg:     resizing, poll: 10 * time.Minute, jitter: time.Minute,
			min: 9 * time.Second, max: 11 * time.Second,
		},
		"ShortPollKept": {
			reason: "A poll interval shorter than TransitionPoll and not below the floor is kept.",
			mg:     resizing, poll: time.Second, floor: time.Second,
			min: time.Second, max: time.Second,
		},
		"Deleting": {
			reason: "A resource being deleted keeps the poll interval (deletion requeues by itself).",
			mg:     deleting, poll: 10 * time.Minute,
			min: 10 * time.Minute, max: 10 * time.Minute,
		},
		"NotReadyOneMillisecond": {
			reason: "A resource that is not Ready and asks for 1ms waits the floor, at most a tenth more.",
			mg:     resizing, poll: time.Millisecond, jitter: time.Minute, floor: 10 * time.Second,
			min: 10 * time.Second, max: 11 * time.Second,
		},
		"ReadyOneMillisecond": {
			reason: "A Ready resource that asks for 1ms waits the floor, at most a tenth more.",
			mg:     ready, poll: time.Millisecond, jitter: time.Minute, floor: 10 * time.Second,
			min: 10 * time.Second, max: 11 * time.Second,
		},
		"ReadyIntervalShorterThanJitter": {
			reason: "A Ready resource whose interval (30s) is shorter than the jitter (1m) is spread by a tenth of its interval, never to zero or less.",
			mg:     ready, poll: 30 * time.Second, jitter: time.Minute, floor: 10 * time.Second,
			min: 27 * time.Second, max: 33 * time.Second,
		},
		"NoFloorIntervalShorterThanJitter": {
			reason: "Without a floor, an interval of 1ms with a jitter of 1m still gives a positive wait of at most 1.1ms.",
			mg:     ready, poll: time.Millisecond, jitter: time.Minute,
			min: 900 * time.Microsecond, max: 1100 * time.Microsecond,
		},
		"JitterScaled": {
			reason: "A jitter shorter than a tenth of the interval is used as it is.",
			mg:     ready, poll: 10 * time.Minute, jitter: 5 * time.Second, floor: 10 * time.Second,
			min: 10*time.Minute - 5*time.Second, max: 10*time.Minute + 5*time.Second,
		},
		"FloorAboveTransitionPoll": {
			reason: "A floor above TransitionPoll holds for a resource that is not Ready too.",
			mg:     resizing, poll: 10 * time.Minute, jitter: time.Minute, floor: 30 * time.Second,
			min: 30 * time.Second, max: 33 * time.Second,
		},
		"DeletingOneMillisecond": {
			reason: "A resource being deleted that asks for 1ms waits the floor.",
			mg:     deleting, poll: time.Millisecond, jitter: time.Minute, floor: 10 * time.Second,
			min: 10 * time.Second, max: 11 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hook := PollInterval(tc.jitter, tc.floor)
			for range 1000 {
				if got := hook(tc.mg, tc.poll); got < tc.min || got > tc.max {
					t.Fatalf("%s\nPollInterval(%s, %s)(..., %s): got %s, want within [%s, %s]", tc.reason, tc.jitter, tc.floor, tc.poll, got, tc.min, tc.max)
				}
			}
		})
	}
}

func TestPollFloor(t *testing.T) {
	cases := map[string]struct {
		reason      string
		floor, poll time.Duration
		want        time.Duration
	}{
		"Default": {
			reason: "No floor set: TransitionPoll.",
			poll:   10 * time.Minute, want: 10 * time.Second,
		},
		"Set": {
			reason: "A floor set is used.",
			floor:  time.Minute, poll: 10 * time.Minute, want: time.Minute,
		},
		"PollShorter": {
			reason: "A controller poll interval shorter than the floor stands: the floor bounds annotations, not the operator's own flag.",
			floor:  10 * time.Second, poll: 2 * time.Second, want: 2 * time.Second,
		},
		"NoPoll": {
			reason: "A controller without a poll interval keeps the floor.",
			floor:  10 * time.Second, want: 10 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := pollFloor(tc.floor, tc.poll); got != tc.want {
				t.Errorf("%s\npollFloor(%s, %s): want %s, got %s", tc.reason, tc.floor, tc.poll, tc.want, got)
			}
		})
	}
}

func TestWithoutGenericUpdates(t *testing.T) {
	cases := map[string]struct {
		reason string
		e      event.Event
		want   []string
	}{
		"RuntimeUpdated": {
			reason: "crossplane-runtime's event after every update is dropped: the connector records its own.",
			e:      event.Normal("UpdatedExternalResource", "Successfully requested update of external resource"),
		},
		"DriftRepaired": {
			reason: "The connector's own update event is recorded.",
			e:      event.Normal("DriftRepaired", "Widget was changed outside Crossplane; restored it: size"),
			want:   []string{"Normal DriftRepaired Widget was changed outside Crossplane; restored it: size"},
		},
		"CannotUpdate": {
			reason: "A failed update is still reported.",
			e:      event.Warning("CannotUpdateExternalResource", errors.New("boom")),
			want:   []string{"Warning CannotUpdateExternalResource boom"},
		},
		"Created": {
			reason: "crossplane-runtime's other events are recorded.",
			e:      event.Normal("CreatedExternalResource", "Successfully requested creation of external resource"),
			want:   []string{"Normal CreatedExternalResource Successfully requested creation of external resource"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The managed reconciler records through a recorder it gets
			// from WithAnnotations at the start of each reconcile.
			for _, via := range []string{"Recorder", "WithAnnotations"} {
				fake := record.NewFakeRecorder(10)
				var r event.Recorder = withoutGenericUpdates{event.NewAPIRecorder(fake)}
				want := tc.want
				if via == "WithAnnotations" {
					r = r.WithAnnotations("external-name", "w")
					want = nil
					for _, e := range tc.want {
						want = append(want, e+" map[external-name:w]") // how the fake shows annotations
					}
				}
				r.Event(widget(nil), tc.e)
				close(fake.Events)
				var got []string
				for e := range fake.Events {
					got = append(got, e)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s\n%s: Event(...): -want, +got:\n%s", tc.reason, via, diff)
				}
			}
		})
	}
}
