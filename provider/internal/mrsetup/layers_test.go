package mrsetup

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// A life is one Widget driven through crossplane-runtime's managed reconciler
// as build assembles it with some layers, against fakeKube and fakeWidgets.
type life struct {
	t    *testing.T
	log  []string
	kube *fakeKube
	ext  *fakeWidgets
	r    *managed.Reconciler
	// steps holds the log of each step, by step name.
	steps map[string][]string
	// queued counts the watch events of the Widget's updates that the
	// controller's predicates let through.
	queued int
}

func newLife(t *testing.T, l layers) *life {
	t.Helper()
	lf := &life{t: t, steps: map[string][]string{}}
	lf.kube = newFakeKube(&lf.log)
	lf.ext = &fakeWidgets{log: &lf.log, details: managed.ConnectionDetails{"endpoint": []byte("https://w-1.example")}}
	o := controller.Options{Logger: logging.NewNopLogger(), PollInterval: time.Minute}
	s, err := build(fakeManager{k: lf.kube}, o, Deps{}, nsv1beta1.WidgetGroupVersionKind,
		func() resource.ManagedList { return &nsv1beta1.WidgetList{} },
		func(Env) managed.TypedExternalConnector[*nsv1beta1.Widget] { return lf.ext }, l)
	if err != nil {
		t.Fatal(err)
	}
	lf.r = s.reconciler
	// Each update of the Widget is a watch event: count those the
	// controller's predicates let through, as reconciles queued.
	lf.kube.onUpdate = func(old, updated client.Object) {
		for _, p := range s.predicates {
			if !p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}) {
				return
			}
		}
		lf.queued++
	}
	w := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-1", Generation: 1}}
	w.Spec.ForProvider.Size = ptr("medium")
	w.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "web-conn"}
	lf.kube.put(w)
	return lf
}

func ptr[T any](v T) *T { return &v }

// reconcile runs one reconcile as step name and returns its result.
func (lf *life) reconcile(name string) reconcile.Result {
	lf.t.Helper()
	before := len(lf.log)
	res, err := lf.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "web"}})
	if err != nil {
		lf.t.Fatalf("step %s: Reconcile(): %v", name, err)
	}
	lf.steps[name] = append([]string{}, lf.log[before:]...)
	return res
}

// widget returns the Widget as the API server has it.
func (lf *life) widget() *nsv1beta1.Widget {
	w, _ := lf.kube.stored(&nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}).(*nsv1beta1.Widget)
	return w
}

// live runs the whole life: created, provisioning, Ready, polled, drift
// repaired, deleted.
func (lf *life) live() {
	lf.reconcile("create")
	lf.reconcile("provisioning")
	lf.ext.ready = true
	lf.reconcile("ready")
	lf.reconcile("poll")
	lf.ext.upToDate = false
	lf.reconcile("drift")
	w := lf.widget()
	now := metav1.Now()
	w.SetDeletionTimestamp(&now)
	lf.kube.objs[lf.kube.key(w)] = w
	lf.reconcile("delete")
	lf.reconcile("deleted")
	if lf.widget() != nil {
		lf.t.Fatalf("the Widget still exists after its life: %v", lf.widget().GetFinalizers())
	}
}

// cost counts a life's kube-apiserver writes (updates, status updates,
// creates and patches of any object, and events) and reads, and the
// reconciles its own writes queued through the watch.
type cost struct {
	writes, reads, queued int
}

func (lf *life) cost() cost {
	c := cost{queued: lf.queued}
	for _, l := range lf.log {
		switch {
		case strings.HasPrefix(l, "kube Get"):
			c.reads++
		case strings.HasPrefix(l, "kube "), strings.HasPrefix(l, "event "):
			c.writes++
		}
	}
	return c
}

// TestStockAndLeanLife pins, call by call, what a Widget's life costs on
// crossplane-runtime's stock path and with every layer on: the difference
// is what the layers are for.
func TestStockAndLeanLife(t *testing.T) {
	steps := []string{"create", "provisioning", "ready", "poll", "drift", "delete", "deleted"}
	cases := map[string]struct {
		reason string
		l      layers
		want   map[string][]string
		cost   cost
	}{
		"Stock": {
			reason: "crossplane-runtime v2.4.0 as provider-template uses it: the initializer, the finalizer, create-pending and create-succeeded are four updates, three of which queue a reconcile; every reconcile reads the connection Secret and ends with a status update.",
			l:      layers{},
			want: map[string][]string{
				"create": {"kube Get Widget", "kube Update Widget", "ext Observe", "kube Get Secret", "kube Create Secret", "kube Update Widget",
					"kube Update Widget", "ext Create", "kube Update Widget", "kube Get Secret", "event Normal CreatedExternalResource", "kube Status().Update Widget"},
				"provisioning": {"kube Get Widget", "ext Observe", "kube Get Secret", "kube Status().Update Widget"},
				"ready":        {"kube Get Widget", "ext Observe", "kube Get Secret", "kube Status().Update Widget"},
				"poll":         {"kube Get Widget", "ext Observe", "kube Get Secret", "kube Status().Update Widget"},
				"drift": {"kube Get Widget", "ext Observe", "kube Get Secret", "ext Update", "kube Get Secret",
					"event Normal UpdatedExternalResource", "kube Status().Update Widget"},
				"delete":  {"kube Get Widget", "ext Observe", "ext Delete", "event Normal DeletedExternalResource", "kube Status().Update Widget"},
				"deleted": {"kube Get Widget", "ext Observe", "kube Update Widget"},
			},
			cost: cost{writes: 15, reads: 14, queued: 3},
		},
		"Lean": {
			reason: "Every layer on: one update (create-pending, carrying the external name and the finalizer) before the create, whose watch event queues nothing; the Secret read once; no status update or event that carries nothing new.",
			l:      lean,
			want: map[string][]string{
				"create":       {"kube Get Widget", "ext Observe", "kube Get Secret", "kube Create Secret", "kube Update Widget", "ext Create", "event Normal CreatedExternalResource", "kube Status().Update Widget"},
				"provisioning": {"kube Get Widget", "ext Observe"},
				"ready":        {"kube Get Widget", "ext Observe", "kube Status().Update Widget"},
				"poll":         {"kube Get Widget", "ext Observe"},
				"drift":        {"kube Get Widget", "ext Observe", "ext Update"},
				"delete":       {"kube Get Widget", "ext Observe", "ext Delete", "event Normal DeletedExternalResource", "kube Status().Update Widget"},
				"deleted":      {"kube Get Widget", "ext Observe", "kube Update Widget"},
			},
			cost: cost{writes: 8, reads: 8},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lf := newLife(t, tc.l)
			lf.live()
			for _, step := range steps {
				if diff := cmp.Diff(tc.want[step], lf.steps[step]); diff != "" {
					t.Errorf("%s\nstep %s: -want, +got:\n%s", tc.reason, step, diff)
				}
			}
			if diff := cmp.Diff(tc.cost, lf.cost(), cmp.AllowUnexported(cost{})); diff != "" {
				t.Errorf("%s\ncost: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLayerSavings switches each layer off in turn and pins what the same
// life then costs more: the unit-level measurement of each layer. A layer
// that saves nothing here names the benchmark that measures it instead
// (docs/reconciler.md); a layer with neither has no reason to stay.
func TestLayerSavings(t *testing.T) {
	cases := map[string]struct {
		reason string
		// saved is what the life costs more without the layer.
		saved cost
		// benchmark, when saved is zero, is where the layer's benefit is
		// measured: a section of docs/benchmarks.md, or of the run history
		// in notes/benchmarks-history.md, relative to docs/ (go test
		// ./docs/ checks that it resolves).
		benchmark string
	}{
		"ownAnnotationsIgnored": {
			reason: "The reconcile the watch event of the create-pending update would queue (the reconciler requeues itself).",
			saved:  cost{queued: 1},
		},
		"freshGate": {
			reason:    "Saves conflicts of reconciles from a stale cache, which a fake API server read directly has not.",
			benchmark: "../notes/benchmarks-history.md#waiting-for-the-cache-the-watch-event-can-beat-the-writes-response",
		},
		"driftFirst": {
			reason:    "Orders requests ahead of the rate limit; writes nothing less.",
			benchmark: "../notes/benchmarks-history.md#provider-widget-drift-repairs-ahead-of-the-reconcile-rate-limit-issue-16",
		},
		"defaultNameUnwritten": {
			reason: "The initializer's update of the default external name.",
			saved:  cost{writes: 1},
		},
		"deferredFinalizer": {
			reason: "The finalizer's own update before the create.",
			saved:  cost{writes: 1},
		},
		"succeededUnwritten": {
			reason: "The external-create-succeeded update after the create.",
			saved:  cost{writes: 1},
		},
		"unchangedStatus": {
			reason: "The status updates of provisioning, the poll and the drift repair, which change nothing.",
			saved:  cost{writes: 3},
		},
		"secretMemo": {
			reason: "The connection Secret reads of every reconcile after the first, within half a poll interval.",
			saved:  cost{reads: 6},
		},
		"oneEventPerUpdate": {
			reason: "crossplane-runtime's UpdatedExternalResource event after the drift repair.",
			saved:  cost{writes: 1},
		},
		"ownEventBroadcaster": {
			reason:    "Memory of the event correlator.",
			benchmark: "../notes/benchmarks-history.md#provider-widget-memory-in-the-steady-state-with-shared-strings-and-the-providers-own-event-broadcaster-issue-16",
		},
		"copyFreeStateMetrics": {
			reason:    "Memory of the state metrics' list.",
			benchmark: "../notes/benchmarks-history.md#provider-widget-memory-at-10000-widgets-with-20000-foreign-secrets-issue-16",
		},
	}
	leanCost := func() cost { lf := newLife(t, lean); lf.live(); return lf.cost() }()
	fields := reflect.TypeOf(layers{})
	for i := range fields.NumField() {
		name := fields.Field(i).Name
		tc, ok := cases[name]
		if !ok {
			t.Errorf("layer %s has no case: say what it saves, or which benchmark measures it", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			l := lean
			// The fields are unexported: set one through its address.
			f := reflect.ValueOf(&l).Elem().FieldByName(name)
			reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetBool(false)
			lf := newLife(t, l)
			lf.live()
			got := lf.cost()
			saved := cost{writes: got.writes - leanCost.writes, reads: got.reads - leanCost.reads, queued: got.queued - leanCost.queued}
			if diff := cmp.Diff(tc.saved, saved, cmp.AllowUnexported(cost{})); diff != "" {
				t.Errorf("%s\nsaved by %s: -want, +got:\n%s", tc.reason, name, diff)
			}
			if saved == (cost{}) && tc.benchmark == "" {
				t.Errorf("%s\n%s saves nothing in a Widget's life and names no benchmark that measures it", tc.reason, name)
			}
		})
	}
}
