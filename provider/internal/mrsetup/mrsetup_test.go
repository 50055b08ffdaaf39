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
		min, max time.Duration
	}{
		"Ready": {
			reason: "A Ready resource waits the poll interval, spread by the jitter.",
			mg:     ready, poll: 10 * time.Minute, jitter: time.Minute,
			min: 9 * time.Minute, max: 11 * time.Minute,
		},
		"NoConditionYet": {
			reason: "A resource that is not Ready yet is polled again within TransitionPoll, with a tenth of it as jitter at most.",
			mg:     widget(nil), poll: 10 * time.Minute, jitter: time.Minute,
			min: TransitionPoll - TransitionPoll/10, max: TransitionPoll + TransitionPoll/10,
		},
		"Resizing": {
			reason: "A widget being resized is polled again within TransitionPoll.",
			mg:     resizing, poll: 10 * time.Minute, jitter: time.Minute,
			min: TransitionPoll - TransitionPoll/10, max: TransitionPoll + TransitionPoll/10,
		},
		"ShortPollKept": {
			reason: "A poll interval shorter than TransitionPoll is kept.",
			mg:     resizing, poll: time.Second,
			min: time.Second, max: time.Second,
		},
		"Deleting": {
			reason: "A resource being deleted keeps the poll interval (deletion requeues by itself).",
			mg:     deleting, poll: 10 * time.Minute,
			min: 10 * time.Minute, max: 10 * time.Minute,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hook := PollInterval(tc.jitter)
			for range 100 {
				if got := hook(tc.mg, tc.poll); got < tc.min || got > tc.max {
					t.Fatalf("%s\nPollInterval(%s)(...): got %s, want within [%s, %s]", tc.reason, tc.jitter, got, tc.min, tc.max)
				}
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
