package mrsetup

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Events of the recorders reach the API server once each, repeated events
// of an object are merged into one with a count, and Start returns once its
// context is done.
func TestEventRecorders(t *testing.T) {
	cs := fake.NewClientset()
	r := NewEventRecorders(cs.CoreV1(), clientgoscheme.Scheme, logging.NewNopLogger())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Start(ctx) }()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "u1"}}
	rec := r.GetEventRecorderFor("managed/widget.widgetco.io")
	for range 3 {
		rec.Event(cm, corev1.EventTypeNormal, "Updated", "Updated widget")
	}
	rec.Event(cm, corev1.EventTypeWarning, "CannotObserve", "cannot observe")

	var events []corev1.Event
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		events = l.Items
		if len(events) == 2 && countOf(events, "Updated") == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(events) != 2 || countOf(events, "Updated") != 3 || countOf(events, "CannotObserve") != 1 {
		t.Errorf("events: got %d (Updated count %d, CannotObserve count %d), want 2 (counts 3 and 1)", len(events), countOf(events, "Updated"), countOf(events, "CannotObserve"))
	}
	for _, e := range events {
		if e.Source.Component != "managed/widget.widgetco.io" {
			t.Errorf("event %s comes from %q, want the controller's name", e.Reason, e.Source.Component)
		}
	}

	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return after its context was done")
	}
	if r.NeedLeaderElection() {
		t.Error("NeedLeaderElection: the broadcaster must stop on every replica, not only the leader")
	}
}

func countOf(events []corev1.Event, reason string) int32 {
	for _, e := range events {
		if e.Reason == reason {
			return e.Count
		}
	}
	return 0
}
