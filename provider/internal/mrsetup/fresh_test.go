package mrsetup

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestFreshness(t *testing.T) {
	at := func(rv string) *nsv1beta1.Widget {
		w := newWidget("uid-1", rv)
		w.SetNamespace("team-a")
		w.SetName("web")
		return w
	}
	key := types.NamespacedName{Namespace: "team-a", Name: "web"}
	cases := map[string]struct {
		reason string
		// steps run in order against a clock that starts at t0; each
		// may advance it.
		steps      func(f *freshness, clock *time.Time)
		wantBehind bool
		// wantObserved are the outcomes behind reports.
		wantObserved []string
	}{
		"NothingWritten": {
			reason: "A resource the controller never wrote is never behind.",
			steps:  func(*freshness, *time.Time) {},
		},
		"Written": {
			reason:       "Right after a write the cache is behind until it holds the written version.",
			steps:        func(f *freshness, _ *time.Time) { f.wrote(at("2"), "1") },
			wantBehind:   true,
			wantObserved: []string{"deferred"},
		},
		"Cached": {
			reason: "Once the cache holds the written version it is no longer behind.",
			steps: func(f *freshness, _ *time.Time) {
				f.wrote(at("2"), "1")
				f.cached(at("2"), false)
			},
		},
		"CachedOlder": {
			reason: "An event for an older version does not count.",
			steps: func(f *freshness, _ *time.Time) {
				f.wrote(at("3"), "2")
				f.cached(at("2"), false)
			},
			wantBehind:   true,
			wantObserved: []string{"deferred"},
		},
		"EventBeforeResponse": {
			reason: "Under load the write's watch event can arrive before its response: the cache already has the write.",
			steps: func(f *freshness, _ *time.Time) {
				f.cached(at("2"), false)
				f.wrote(at("2"), "1")
			},
		},
		"OlderEventBeforeResponse": {
			reason: "An event for a version before the write, seen before the write's response, does not count.",
			steps: func(f *freshness, _ *time.Time) {
				f.cached(at("1"), false)
				f.wrote(at("2"), "1")
			},
			wantBehind:   true,
			wantObserved: []string{"deferred"},
		},
		"NoopWrite": {
			reason: "An update that changed nothing keeps its version and has no event to wait for.",
			steps:  func(f *freshness, _ *time.Time) { f.wrote(at("2"), "2") },
		},
		"Deleted": {
			reason: "A deleted resource is not waited for.",
			steps: func(f *freshness, _ *time.Time) {
				f.wrote(at("2"), "1")
				f.cached(at("1"), true)
			},
		},
		"Expired": {
			reason: "A cache that has not caught up within freshMaxWait stops holding the resource back.",
			steps: func(f *freshness, clock *time.Time) {
				f.wrote(at("2"), "1")
				*clock = clock.Add(freshMaxWait)
			},
			wantObserved: []string{"expired"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
			f := newFreshness()
			f.now = func() time.Time { return clock }
			var observed []string
			f.observe = func(o string) { observed = append(observed, o) }
			tc.steps(f, &clock)
			if got := f.behind(key); got != tc.wantBehind {
				t.Errorf("%s\nbehind(): want %t, got %t", tc.reason, tc.wantBehind, got)
			}
			if diff := cmp.Diff(tc.wantObserved, observed); diff != "" {
				t.Errorf("%s\nobserved outcomes: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFreshnessPrunes(t *testing.T) {
	clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	f := newFreshness()
	f.now = func() time.Time { return clock }
	for i := range freshPrune {
		w := newWidget("uid", "2")
		w.SetName(fmt.Sprintf("gone-%d", i))
		f.wrote(w, "1")
	}
	clock = clock.Add(freshMaxWait)
	f.wrote(newWidget("uid", "2"), "1")
	if n := len(f.entries); n != 1 {
		t.Errorf("after %d expired writes and one new: %d remembered, want 1 (resources deleted right after a write must not accumulate)", freshPrune, n)
	}
}

// countingReconciler counts its reconciles.
type countingReconciler struct{ n int }

func (c *countingReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	c.n++
	return reconcile.Result{}, nil
}

func TestFreshGate(t *testing.T) {
	cases := map[string]struct {
		reason     string
		behind     bool
		want       reconcile.Result
		wantCalled int
	}{
		"Fresh": {
			reason:     "A resource whose cache is not behind is reconciled.",
			wantCalled: 1,
		},
		"Behind": {
			reason: "A resource whose cache is behind the controller's write is put off briefly, without reconciling.",
			behind: true,
			want:   reconcile.Result{RequeueAfter: freshRetry},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFreshness()
			w := newWidget("uid-1", "2")
			w.SetNamespace("team-a")
			w.SetName("web")
			if tc.behind {
				f.wrote(w, "1")
			}
			next := &countingReconciler{}
			got, err := freshGate{fresh: f, next: next}.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nReconcile(): -want, +got:\n%s", tc.reason, diff)
			}
			if next.n != tc.wantCalled {
				t.Errorf("%s\nreconciles: want %d, got %d", tc.reason, tc.wantCalled, next.n)
			}
		})
	}
}

func TestWriteRecorder(t *testing.T) {
	cases := map[string]struct {
		reason     string
		obj        client.Object
		write      func(c client.Client, o client.Object) error
		err        error
		wantBehind bool
	}{
		"Update": {
			reason:     "An update of the controller's kind is recorded.",
			obj:        newWidget("uid-1", "1"),
			write:      func(c client.Client, o client.Object) error { return c.Update(context.Background(), o) },
			wantBehind: true,
		},
		"Patch": {
			reason:     "A patch of the controller's kind is recorded.",
			obj:        newWidget("uid-1", "1"),
			write:      func(c client.Client, o client.Object) error { return c.Patch(context.Background(), o, client.Merge) },
			wantBehind: true,
		},
		"StatusUpdate": {
			reason:     "A status update is recorded.",
			obj:        newWidget("uid-1", "1"),
			write:      func(c client.Client, o client.Object) error { return c.Status().Update(context.Background(), o) },
			wantBehind: true,
		},
		"StatusPatch": {
			reason: "A status patch is recorded.",
			obj:    newWidget("uid-1", "1"),
			write: func(c client.Client, o client.Object) error {
				return c.Status().Patch(context.Background(), o, client.Merge)
			},
			wantBehind: true,
		},
		"Failed": {
			reason: "A failed write (a conflict) is not recorded.",
			obj:    newWidget("uid-1", "1"),
			write:  func(c client.Client, o client.Object) error { return c.Update(context.Background(), o) },
			err:    errBoom,
		},
		"OtherKind": {
			reason: "Writes of other kinds (connection Secrets, usages) are not recorded.",
			obj:    &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "1"}},
			write:  func(c client.Client, o client.Object) error { return c.Update(context.Background(), o) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The API server answers with a new resource version.
			bump := func(o client.Object) error {
				if tc.err != nil {
					return tc.err
				}
				o.SetResourceVersion("2")
				return nil
			}
			kube := &test.MockClient{
				MockUpdate: func(_ context.Context, o client.Object, _ ...client.UpdateOption) error { return bump(o) },
				MockPatch: func(_ context.Context, o client.Object, _ client.Patch, _ ...client.PatchOption) error {
					return bump(o)
				},
				MockStatusUpdate: func(_ context.Context, o client.Object, _ ...client.SubResourceUpdateOption) error { return bump(o) },
				MockStatusPatch: func(_ context.Context, o client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
					return bump(o)
				},
			}
			f := newFreshness()
			c := writeRecorder{Client: kube, fresh: f, status: newStatusMemo(), isKind: func(o client.Object) bool { _, ok := o.(*nsv1beta1.Widget); return ok }}
			if err := tc.write(c, tc.obj); !errors.Is(err, tc.err) {
				t.Fatalf("%s\nwrite: want error %v, got %v", tc.reason, tc.err, err)
			}
			if got := f.behind(client.ObjectKeyFromObject(tc.obj)); got != tc.wantBehind {
				t.Errorf("%s\nbehind(): want %t, got %t", tc.reason, tc.wantBehind, got)
			}
		})
	}
}

func TestCacheObserver(t *testing.T) {
	f := newFreshness()
	w := newWidget("uid-1", "2")
	f.wrote(w, "1")
	p := cacheObserver{fresh: f}
	old := newWidget("uid-1", "1")
	if !p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: w}) || !p.Create(event.CreateEvent{Object: w}) ||
		!p.Delete(event.DeleteEvent{Object: w}) || !p.Generic(event.GenericEvent{Object: w}) {
		t.Error("cacheObserver filtered an event; it must pass every event on to the controller's other predicates")
	}
	f.wrote(w, "1")
	p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: w})
	if f.behind(client.ObjectKeyFromObject(w)) {
		t.Error("the update event of the written version did not tell freshness that the cache caught up")
	}
}

func TestStatusUpdateSkipped(t *testing.T) {
	cases := map[string]struct {
		reason string
		// change changes the resource after it was read.
		change     func(w *nsv1beta1.Widget)
		wantWrites int
	}{
		"Unchanged": {
			reason: "A status update that changes nothing is not sent.",
			change: func(*nsv1beta1.Widget) {},
		},
		"Changed": {
			reason:     "A changed status is sent.",
			change:     func(w *nsv1beta1.Widget) { w.SetConditions(xpv2.Available()) },
			wantWrites: 1,
		},
		"Recreated": {
			reason:     "A resource of the same name but another UID is another resource: its status is sent.",
			change:     func(w *nsv1beta1.Widget) { w.SetUID("uid-2") },
			wantWrites: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stored := newWidget("uid-1", "1")
			stored.SetConditions(xpv2.Creating())
			writes := 0
			kube := &test.MockClient{
				MockGet: func(_ context.Context, _ client.ObjectKey, o client.Object) error {
					stored.DeepCopyInto(o.(*nsv1beta1.Widget))
					return nil
				},
				MockStatusUpdate: func(_ context.Context, o client.Object, _ ...client.SubResourceUpdateOption) error {
					writes++
					o.SetResourceVersion("2")
					return nil
				},
			}
			skipped := 0
			c := writeRecorder{Client: kube, fresh: newFreshness(), status: newStatusMemo(), isKind: func(o client.Object) bool { _, ok := o.(*nsv1beta1.Widget); return ok },
				skipped: func() { skipped++ }}
			w := &nsv1beta1.Widget{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(stored), w); err != nil {
				t.Fatal(err)
			}
			tc.change(w)
			if err := c.Status().Update(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			if writes != tc.wantWrites {
				t.Errorf("%s\nstatus updates sent: want %d, got %d", tc.reason, tc.wantWrites, writes)
			}
			// What was written is what the API server has now: the
			// same status again is not sent.
			if err := c.Status().Update(t.Context(), w); err != nil {
				t.Fatal(err)
			}
			if writes != tc.wantWrites {
				t.Errorf("%s\nthe same status sent again after it was written", tc.reason)
			}
			if want := 2 - tc.wantWrites; skipped != want {
				t.Errorf("%s\nskipped updates counted: want %d, got %d", tc.reason, want, skipped)
			}
		})
	}
}
