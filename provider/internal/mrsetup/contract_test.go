package mrsetup

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
)

// Contract tests: what the layers assume of crossplane-runtime v2.4.0's
// managed reconciler, one test per assumption, each run against the real
// managed.Reconciler with stock pieces (the fakes log the calls; see
// kube_test.go). A crossplane-runtime upgrade that breaks an assumption
// fails the test named for it; docs/reconciler.md lists which layer
// depends on which test. These tests say nothing about our layers: they
// pin the library.

// runtimeFor returns crossplane-runtime's managed reconciler for Widgets as
// the provider configures it where it is not a layer (deterministic names,
// no creation grace period), on the fakes, with extra options.
func runtimeFor(k *fakeKube, ext *fakeWidgets, o ...managed.ReconcilerOption) *managed.Reconciler {
	opts := append([]managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*nsv1beta1.Widget](ext),
		managed.WithInitializers(names.NewInitializer()),
		managed.WithDeterministicExternalName(true),
		managed.WithCreationGracePeriod(0),
		managed.WithPollInterval(time.Minute),
	}, o...)
	return managed.NewReconciler(fakeManager{k: k}, resource.ManagedKind(nsv1beta1.WidgetGroupVersionKind), opts...)
}

// newWidgetIn stores a new Widget in k and returns it as stored.
func newWidgetIn(k *fakeKube, annotations map[string]string) *nsv1beta1.Widget {
	w := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-1", Generation: 1, Annotations: annotations}}
	w.Spec.ForProvider.Size = ptr("medium")
	k.put(w)
	return w
}

var req = reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "web"}}

// logged returns a function that appends entry to log.
func logged(log *[]string, entry string) func() { return func() { *log = append(*log, entry) } }

// inMemoryFinalizer adds and removes the finalizer without a write,
// logging "AddFinalizer" and "RemoveFinalizer".
func inMemoryFinalizer(log *[]string) resource.Finalizer {
	return resource.FinalizerFns{
		AddFinalizerFn: func(_ context.Context, o resource.Object) error {
			logged(log, "AddFinalizer")()
			meta.AddFinalizer(o, managed.FinalizerName)
			return nil
		},
		RemoveFinalizerFn: func(_ context.Context, o resource.Object) error {
			logged(log, "RemoveFinalizer")()
			meta.RemoveFinalizer(o, managed.FinalizerName)
			return nil
		},
	}
}

// TestRuntimeObservesBeforeAddingFinalizer: deferredFinalizer decides from
// this reconcile's Observe whether the external resource exists, so
// AddFinalizer must come after Observe, and for a resource whose external
// resource is absent the create-pending update must follow in the same
// reconcile.
func TestRuntimeObservesBeforeAddingFinalizer(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	newWidgetIn(k, nil)
	r := runtimeFor(k, &fakeWidgets{log: &log}, managed.WithFinalizer(inMemoryFinalizer(&log)))
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	// (An update of create-succeeded follows the create.)
	want := []string{"ext Observe", "AddFinalizer", "kube Update Widget", "ext Create"}
	if diff := cmp.Diff(want, calls(log, "ext Observe", "AddFinalizer", "kube Update", "ext Create")[:4]); diff != "" {
		t.Errorf("a new resource's first reconcile: -want, +got:\n%s", diff)
	}
}

// TestRuntimeSavesCreatePendingWithTheWholeObject: deferredFinalizer and
// defaultNameUnwritten leave the finalizer and the default external name in
// memory; they rely on the create-pending annotation being saved with a
// client Update of the whole object, before Create, which saves them too.
func TestRuntimeSavesCreatePendingWithTheWholeObject(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	newWidgetIn(k, nil)
	r := runtimeFor(k, &fakeWidgets{log: &log}, managed.WithFinalizer(inMemoryFinalizer(&log)))
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kube Update Widget", "ext Create"}, calls(log, "kube Update", "kube Patch", "ext Create")[:2]); diff != "" {
		t.Fatalf("the first write before the create: -want, +got:\n%s", diff)
	}
	first := k.writes[0]
	got := map[string]bool{
		"finalizer":               meta.FinalizerExists(first, managed.FinalizerName),
		"external-name":           meta.GetExternalName(first) == "team-a-web-a6d68893",
		"external-create-pending": !meta.GetExternalCreatePending(first).IsZero(),
	}
	want := map[string]bool{"finalizer": true, "external-name": true, "external-create-pending": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the create-pending update saved: -want, +got:\n%s", diff)
	}
}

// TestRuntimeInitializesBeforeResolvingReferences: defaultNameUnwritten
// sets the default external name again after references are resolved
// (reinitializing), because a resolver that patches replaces the object
// with the API server's copy; that needs Initialize to come first, and
// ResolveReferences to come before Connect, in every reconcile.
func TestRuntimeInitializesBeforeResolvingReferences(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	newWidgetIn(k, nil)
	r := runtimeFor(k, &fakeWidgets{log: &log},
		managed.WithInitializers(managed.InitializerFn(func(context.Context, resource.Managed) error { logged(&log, "Initialize")(); return nil })),
		managed.WithReferenceResolver(managed.ReferenceResolverFn(func(context.Context, resource.Managed) error {
			logged(&log, "ResolveReferences")()
			return nil
		})),
		managed.WithFinalizer(inMemoryFinalizer(&log)))
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := []string{"Initialize", "ResolveReferences", "ext Observe"}
	if diff := cmp.Diff(want, calls(log, "Initialize", "ResolveReferences", "ext Observe")); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}

// TestRuntimeUpdatesCriticalAnnotationsOnlyAfterCreate: succeededUnwritten
// skips UpdateCriticalAnnotations when the object's latest marker is
// external-create-succeeded. That is safe because the reconciler calls it
// only right after Create: after a successful one with the succeeded
// marker newest, after a failed one with the failed marker newest.
func TestRuntimeUpdatesCriticalAnnotationsOnlyAfterCreate(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	newWidgetIn(k, nil)
	ext := &fakeWidgets{log: &log, createErr: errBoom}
	u := managed.CriticalAnnotationUpdateFn(func(_ context.Context, o client.Object) error {
		if createSucceeded(o) {
			logged(&log, "UpdateCriticalAnnotations(succeeded)")()
		} else {
			logged(&log, "UpdateCriticalAnnotations(failed)")()
		}
		return nil
	})
	r := runtimeFor(k, ext, managed.WithCriticalAnnotationUpdater(u))
	for range 2 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		ext.createErr = nil
	}
	// Ready, then deleted.
	ext.ready = true
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	w := k.stored(&nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}})
	now := metav1.Now()
	w.SetDeletionTimestamp(&now)
	k.objs[k.key(w)] = w
	for range 2 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"ext Create", "UpdateCriticalAnnotations(failed)", "ext Create", "UpdateCriticalAnnotations(succeeded)", "ext Delete"}
	if diff := cmp.Diff(want, calls(log, "ext Create", "ext Delete", "UpdateCriticalAnnotations")); diff != "" {
		t.Errorf("a failed create, a successful one, Ready, deleted: -want, +got:\n%s", diff)
	}
}

// TestRuntimeProceedsPastAnIncompleteCreateWithDeterministicNames:
// succeededUnwritten leaves every created resource with
// external-create-pending and no external-create-succeeded, which
// crossplane-runtime reads as "the create may not have finished". With
// WithDeterministicExternalName it must still observe and carry on.
func TestRuntimeProceedsPastAnIncompleteCreateWithDeterministicNames(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	w := newWidgetIn(k, map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893"})
	meta.SetExternalCreatePending(w, time.Now().Add(-time.Minute))
	meta.AddFinalizer(w, managed.FinalizerName)
	k.put(w)
	r := runtimeFor(k, &fakeWidgets{log: &log, exists: true, upToDate: true, ready: true})
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := []string{"kube Get Widget", "ext Observe", "kube Status().Update Widget"}
	if diff := cmp.Diff(want, calls(log)); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}

// TestRuntimeEndsEveryReconcileWithAStatusUpdate: unchangedStatus skips a
// status update whose status is the one the API server has. It is worth it
// because the reconciler ends a reconcile that finds nothing new with a
// status update, and it works because that update carries the same status
// (conditions that did not change keep their transition times).
func TestRuntimeEndsEveryReconcileWithAStatusUpdate(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	w := newWidgetIn(k, map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893"})
	meta.AddFinalizer(w, managed.FinalizerName)
	k.put(w)
	r := runtimeFor(k, &fakeWidgets{log: &log, exists: true, upToDate: true, ready: true})
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	before := k.stored(w).(*nsv1beta1.Widget).Status
	log = nil
	// Condition times have a resolution of a second.
	time.Sleep(1100 * time.Millisecond)
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kube Get Widget", "ext Observe", "kube Status().Update Widget"}, calls(log)); diff != "" {
		t.Errorf("a reconcile that finds nothing new: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(before, k.stored(w).(*nsv1beta1.Widget).Status); diff != "" {
		t.Errorf("the status it writes: -before, +after:\n%s", diff)
	}
}

// TestRuntimeTakesEveryClientFromTheManager: WithClient hands
// crossplane-runtime a manager whose client is the layers' client stack
// (write recorder, secret memo). That reaches every read and write only
// because NewReconciler builds its initializer, finalizer, reference
// resolver, connection publisher and critical annotation updater from
// mgr.GetClient() and nothing else: fakeManager panics on any other method.
func TestRuntimeTakesEveryClientFromTheManager(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	w := newWidgetIn(k, nil)
	w.Spec.WriteConnectionSecretToReference = &xpv1LocalRef
	k.put(w)
	ext := &fakeWidgets{log: &log, details: managed.ConnectionDetails{"endpoint": []byte("e")}}
	r := managed.NewReconciler(fakeManager{k: k}, resource.ManagedKind(nsv1beta1.WidgetGroupVersionKind),
		managed.WithTypedExternalConnector[*nsv1beta1.Widget](ext))
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	got := calls(log, "kube")
	slices.Sort(got)
	got = slices.Compact(got)
	want := []string{"kube Create Secret", "kube Get Secret", "kube Get Widget", "kube Status().Update Widget", "kube Update Widget"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the calls that reached the manager's client: -want, +got:\n%s", diff)
	}
}

var xpv1LocalRef = xpv2.LocalSecretReference{Name: "web-conn"}

// TestRuntimeReadsConnectionSecretsWithAPlainGet: secretMemo answers a Get
// of a connection Secret without options from memory, and only when the
// Secret it is asked for is controlled by the same owner as the one it
// remembers. crossplane-runtime's publisher must read that way: a Get
// without options, into a Secret of the connection type that carries the
// resource's controller reference.
func TestRuntimeReadsConnectionSecretsWithAPlainGet(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	w := newWidgetIn(k, nil)
	w.Spec.WriteConnectionSecretToReference = &xpv1LocalRef
	k.put(w)
	var got []string
	spy := secretGetSpy{Client: k, seen: &got}
	ext := &fakeWidgets{log: &log, exists: true, upToDate: true, details: managed.ConnectionDetails{"endpoint": []byte("e")}}
	r := managed.NewReconciler(spyManager{fakeManager: fakeManager{k: k}, c: spy}, resource.ManagedKind(nsv1beta1.WidgetGroupVersionKind),
		managed.WithTypedExternalConnector[*nsv1beta1.Widget](ext), managed.WithInitializers())
	for range 2 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"Get Secret opts=0 type=connection.crossplane.io/v1alpha1 owner=uid-1", "Get Secret opts=0 type=connection.crossplane.io/v1alpha1 owner=uid-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}

// secretGetSpy describes each Get of a Secret in seen.
type secretGetSpy struct {
	client.Client
	seen *[]string
}

func (s secretGetSpy) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if sec, ok := o.(*corev1.Secret); ok {
		owner := "none"
		if ref := metav1.GetControllerOf(sec); ref != nil {
			owner = string(ref.UID)
		}
		*s.seen = append(*s.seen, "Get Secret opts="+strconv.Itoa(len(opts))+" type="+string(sec.Type)+" owner="+owner)
	}
	return s.Client.Get(ctx, key, o, opts...)
}

type spyManager struct {
	fakeManager
	c client.Client
}

func (m spyManager) GetClient() client.Client { return m.c }

// TestRuntimeRecordsUpdatesThroughWithAnnotations: oneEventPerUpdate drops
// the event with reason reasonRuntimeUpdated. It wraps the recorder rather
// than filtering, because the reconciler records through the recorder
// WithAnnotations returns, which must be wrapped too; and the reason must
// be the one crossplane-runtime uses.
func TestRuntimeRecordsUpdatesThroughWithAnnotations(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	w := newWidgetIn(k, map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893"})
	meta.AddFinalizer(w, managed.FinalizerName)
	k.put(w)
	rec := &annotatingRecorder{log: &log}
	r := runtimeFor(k, &fakeWidgets{log: &log, exists: true, ready: true}, managed.WithRecorder(rec))
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := []string{"ext Update", "annotated event Normal " + string(reasonRuntimeUpdated)}
	if diff := cmp.Diff(want, calls(log, "ext Update", "event", "annotated event")); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}

// annotatingRecorder logs "event ..." for its own events and "annotated
// event ..." for those of the recorder WithAnnotations returns.
type annotatingRecorder struct {
	log       *[]string
	annotated bool
}

func (r *annotatingRecorder) Event(_ runtime.Object, e event.Event) {
	prefix := "event "
	if r.annotated {
		prefix = "annotated event "
	}
	*r.log = append(*r.log, prefix+string(e.Type)+" "+string(e.Reason))
}

func (r *annotatingRecorder) WithAnnotations(...string) event.Recorder {
	return &annotatingRecorder{log: r.log, annotated: true}
}

// TestRuntimeRequeuesAfterItsOwnCreateWrites: ownAnnotationsIgnored drops
// the watch events of the annotations the reconciler writes while
// creating (and of the default external name, which the create-pending
// update saves). Nothing is lost because each reconcile that writes them
// asks to be requeued at once.
func TestRuntimeRequeuesAfterItsOwnCreateWrites(t *testing.T) {
	cases := map[string]struct {
		reason    string
		createErr error
	}{
		"Created": {reason: "After create-pending and a successful create the reconciler requeues."},
		"Failed":  {reason: "After create-pending and a failed create (create-failed) the reconciler requeues.", createErr: errBoom},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var log []string
			k := newFakeKube(&log)
			newWidgetIn(k, nil)
			r := runtimeFor(k, &fakeWidgets{log: &log, createErr: tc.createErr})
			res, err := r.Reconcile(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(reconcile.Result{Requeue: true}, res); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRuntimeWritesOnlyItsKnownAnnotations: ownAnnotationsIgnored knows the
// annotations the reconciler writes by name (ownAnnotations). A new one in
// a crossplane-runtime upgrade would be a watch event the predicate lets
// through: a reconcile for nothing, once per resource.
func TestRuntimeWritesOnlyItsKnownAnnotations(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	newWidgetIn(k, nil)
	ext := &fakeWidgets{log: &log, createErr: errBoom}
	r := runtimeFor(k, ext)
	for range 3 {
		if _, err := r.Reconcile(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		ext.createErr = nil
	}
	got := map[string]bool{}
	for _, w := range k.writes {
		for a := range w.GetAnnotations() {
			got[a] = true
		}
	}
	want := map[string]bool{meta.AnnotationKeyExternalName: true}
	for _, a := range ownAnnotations {
		want[a] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations written in a failed create, a create and a poll: -want, +got:\n%s", diff)
	}
}

// TestRuntimeRemovesTheFinalizerLast: forgettingFinalizer (stock.go) tells
// the change feed to forget a resource once its finalizer is removed. That
// is right only if removing it is the reconciler's last call for the
// resource.
func TestRuntimeRemovesTheFinalizerLast(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	w := newWidgetIn(k, map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893"})
	meta.AddFinalizer(w, managed.FinalizerName)
	now := metav1.Now()
	w.SetDeletionTimestamp(&now)
	k.put(w)
	r := runtimeFor(k, &fakeWidgets{log: &log}, managed.WithFinalizer(inMemoryFinalizer(&log)))
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := log[len(log)-1]; got != "RemoveFinalizer" {
		t.Errorf("the last call of a deleted resource's reconcile: want RemoveFinalizer, got %q (all: %v)", got, log)
	}
}

// TestRuntimeStateMetricsAreOurs: copyFreeStateMetrics replaces
// crossplane-runtime's statemetrics.MRStateRecorder, so it must publish the
// same series: the same gauges, the same gvk label, the same values.
func TestRuntimeStateMetricsAreOurs(t *testing.T) {
	ready := newWidget("uid-a", "1")
	ready.SetName("a")
	ready.SetConditions(xpv2.Available(), xpv2.ReconcileSuccess())
	creating := newWidget("uid-b", "1")
	creating.SetName("b")
	creating.SetConditions(xpv2.Creating(), xpv2.ReconcileError(errBoom))
	items := []nsv1beta1.Widget{*ready, *creating}
	list := func(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
		l.(*nsv1beta1.WidgetList).Items = items
		return nil
	}
	k := newFakeKube(new([]string))

	stock := statemetrics.NewMRStateMetrics()
	c := &test.MockClient{MockList: list, MockScheme: test.NewMockSchemeFn(k.scheme)}
	if err := statemetrics.NewMRStateRecorder(c, logging.NewNopLogger(), stock, &nsv1beta1.WidgetList{}, time.Minute).Record(t.Context()); err != nil {
		t.Fatal(err)
	}
	ours := statemetrics.NewMRStateMetrics()
	r := newStateRecorder(listerFunc(list), nsv1beta1.WidgetGroupVersionKind, func() resource.ManagedList { return &nsv1beta1.WidgetList{} }, ours, time.Minute, logging.NewNopLogger())
	if err := r.record(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`crossplane_managed_resource_exists{gvk="widget.m.widgetco.io/v1beta1, Kind=Widget"} 2`,
		`crossplane_managed_resource_ready{gvk="widget.m.widgetco.io/v1beta1, Kind=Widget"} 1`,
		`crossplane_managed_resource_synced{gvk="widget.m.widgetco.io/v1beta1, Kind=Widget"} 1`,
	}
	if diff := cmp.Diff(want, series(t, stock)); diff != "" {
		t.Errorf("crossplane-runtime's state metrics: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(want, series(t, ours)); diff != "" {
		t.Errorf("our state metrics: -want, +got:\n%s", diff)
	}
}

// series returns the gauges c collects as `name{label="value",...} value`.
func series(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			out = append(out, mf.GetName()+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64))
		}
	}
	return out
}
