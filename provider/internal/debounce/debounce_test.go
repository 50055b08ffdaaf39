package debounce

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
}

// drain returns what the queue holds now, without blocking.
func drain(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
	var got []string
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		got = append(got, r.String())
	}
	return got
}

func TestHandlerPassesEveryEventKind(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := Handler(&handler.EnqueueRequestForObject{}, 0)
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: cm("created")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cm("updated"), ObjectNew: cm("updated")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: cm("deleted")}, q)
	h.Generic(ctx, event.GenericEvent{Object: cm("generic")}, q)
	want := map[string]bool{"team-a/created": true, "team-a/updated": true, "team-a/deleted": true, "team-a/generic": true}
	got := map[string]bool{}
	for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range drain(q) {
			got[r] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("enqueued: -want, +got:\n%s", diff)
	}
}

func TestHandlerDelays(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := Handler(&handler.EnqueueRequestForObject{}, time.Hour)
	for range 3 {
		h.Create(context.Background(), event.CreateEvent{Object: cm("burst")}, q)
	}
	if got := drain(q); len(got) != 0 {
		t.Errorf("queue right after a burst: want nothing yet (the requests wait an hour), got %v", got)
	}
}
