//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/audit"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// e2eRun is the outcome of one run.
type e2eRun struct {
	n, ready  int
	kinds     []*kindRun // the run's kinds of objects, by kind
	createFor time.Duration
	allReady  time.Duration // first create sent to the last object Ready (or to giving up)
	end       time.Time     // when allReady ends
	timedOut  bool
	toReady   []time.Duration // of every object
	relists   []string        // the benchmark's watches that had to re-list

	idle   time.Duration
	steady time.Duration
	procs  []procCPU
	cpuRun map[string]time.Duration // process -> CPU during the run
	cpuIdl map[string]time.Duration // during the idle window
	cpuSty map[string]time.Duration // during the steady window
	rssKB  map[string]int

	core, fn, prov, apisrv metricDelta // during the run
	coreSty, fnSty         metricDelta // during the steady window
	apisrvSty              metricDelta
	widgetAPI              map[string]float64
	widgetAPISty           float64
	// writes are what every write to a managed resource, XR or claim did,
	// from kube-apiserver's audit log (WIDGET_AUDIT_BODIES=1 only).
	writes []audit.Writes
}

// kindRun is how the objects of one kind fared in a run.
type kindRun struct {
	kind      *e2eKind
	n, ready  int
	warmup    time.Duration // the first object, cold, to Ready
	allReady  time.Duration // first create sent to the kind's last object Ready (or to giving up)
	toReady   []time.Duration
	stages    map[string][]time.Duration // stage -> per object Ready, from its create request
	gaps      map[string][]time.Duration // stage -> per object Ready, from the stage before
	notReady  map[string]int             // how the objects that never got Ready ended, by status
	slowest   string                     // the slowest object's stage times
	slowestAt time.Duration
	inverted  int            // claims whose XR was seen Ready after the claim
	flaps     map[string]int // stage -> times a Ready stage was lost again
	flapped   map[string]int // stage -> objects that lost it
	lostAfter int            // losses of the object's or its XR's Ready after all objects were Ready
	losses    []time.Time    // when the object's or its XR's Ready was lost, each time
	readyEnd  int            // objects Ready at the end of the steady-state window
	xrLag     []time.Duration
}

// newRun is a run of n objects of kinds, taken in turn.
func newRun(n int, steady time.Duration, kinds []*e2eKind) *e2eRun {
	r := &e2eRun{n: n, idle: e2eIdle, steady: steady}
	for i, k := range kinds {
		r.kinds = append(r.kinds, &kindRun{
			kind: k, n: (n - i + len(kinds) - 1) / len(kinds),
			stages: map[string][]time.Duration{}, gaps: map[string][]time.Duration{}, notReady: map[string]int{},
			flaps: map[string]int{}, flapped: map[string]int{},
		})
	}
	return r
}

// object is the run's i-th object: of the kinds in turn, named by its kind's
// prefix and its number among them.
func (r *e2eRun) object(ns string, i int) client.Object {
	k := r.kinds[i%len(r.kinds)].kind
	return k.newObject(ns, fmt.Sprintf("%s%04d", k.prefix, i/len(r.kinds)))
}

// kindOf is the kind of the object name, or nil.
func (r *e2eRun) kindOf(name string) *kindRun {
	for _, k := range r.kinds {
		if strings.HasPrefix(name, k.kind.prefix) {
			return k
		}
	}
	return nil
}

// mixed reports whether the run created more than one kind of object.
func (r *e2eRun) mixed() bool { return len(r.kinds) > 1 }

// run is one run on e's control plane: a warm-up object of each kind to
// Ready, the processes' idle CPU, n objects of mix's kinds to Ready with
// every stage watched, then the steady-state window.
func (e *e2eEnv) run(t *testing.T, n int, steady time.Duration, mix []*e2eKind) *e2eRun {
	t.Helper()
	ctx := context.Background()
	kinds := e.kinds(t, mix)
	r := newRun(n, steady, kinds)
	for _, ns := range []string{e2eWarmupNS, e2eNamespace} {
		if err := platform.EnsureNamespace(ctx, e.c.Client(), ns); err != nil {
			t.Fatal(err)
		}
	}

	for _, k := range r.kinds {
		k.warmup = e.warmUp(ctx, t, k.kind.newObject(e2eWarmupNS, "warmup"))
		t.Logf("e2e: warm-up %s Ready in %s", k.kind.name, k.warmup.Round(10*time.Millisecond))
	}

	// The processes, and how much CPU they use doing nothing.
	r.procs = e.processes(t)
	time.Sleep(5 * time.Second) // let the warm-up's last reconciles pass
	c0 := cpuSnapshot(r.procs)
	time.Sleep(r.idle)
	c1 := cpuSnapshot(r.procs)
	r.cpuIdl = cpuDelta(c0, c1)

	// Watches of every stage, started before the objects.
	tl := newTimeline(n, kinds)
	wctx, cancelWatches := context.WithCancel(ctx)
	defer cancelWatches()
	watches := r.watchStages(wctx, t, e.kube, tl)
	time.Sleep(time.Second) // let the watches list

	sent, end := r.burst(t, e, tl)
	if r.timedOut {
		r.explainNotReady(ctx, t, e, sent, tl)
	}
	if steady > 0 {
		r.measureSteady(t, e)
	}
	cancelWatches()
	watches.Wait()
	r.collectStages(sent, tl, end)
	e.countReady(ctx, t, r)
	for _, k := range r.kinds {
		if k.kind.gvk == gvkClaim {
			k.xrLag = e.xrWatchLag(ctx, t, tl)
		}
	}
	if os.Getenv("WIDGET_AUDIT_BODIES") != "" {
		w, err := e.c.Writes()
		if err != nil {
			t.Errorf("cannot count writes from the audit log: %v", err)
		}
		r.writes = w
	}
	return r
}

// claimMaker returns a function that makes the claim ns/name:
// examples/composition/legacy/claim.yaml renamed, with its own connection
// Secret.
func (e *e2eEnv) claimMaker(t *testing.T) func(ns, name string) *unstructured.Unstructured {
	t.Helper()
	mk, _ := e.exampleMaker(t, kindClaim.example)
	return mk
}

// warmUp creates w, a claim or an XR, cold, and returns how long it took
// to be Ready: core starts its watches of the composed kinds and dials the
// function on first use.
func (e *e2eEnv) warmUp(ctx context.Context, t *testing.T, w *unstructured.Unstructured) time.Duration {
	t.Helper()
	t0 := time.Now()
	if err := e.kube.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	for {
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(w), w); err == nil && claimReady(w) {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			t.Fatalf("the warm-up %s is not Ready after 5m: %s (logs in %s)", w.GetKind(), platform.StatusLine(w), filepath.Join(e.dir, "logs"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(t0)
}

// burst creates the run's r.n objects from e2eWorkers concurrent clients
// and waits until all are Ready or e2eWait has passed. The processes' CPU
// time, their metrics and the Widget API's requests are read just before
// the first create and when the wait ends. It returns when each object's
// create request was sent, and when the wait ended.
func (r *e2eRun) burst(t *testing.T, e *e2eEnv, tl *timeline) (map[string]time.Time, time.Time) {
	t.Helper()
	r.core.before, r.fn.before, r.prov.before, r.apisrv.before = e.scrapeAll(t)
	api0, _, _ := widgetAPIRequests(e.widgets.Server)
	c0 := cpuSnapshot(r.procs)
	start := time.Now()
	sent, createFor := createAll(t, e.kube, r.n, e2eWorkers, func(i int) client.Object {
		return r.object(e2eNamespace, i)
	})
	r.createFor = createFor
	t.Logf("e2e: %d %s created in %s", len(sent), r.many(), r.createFor.Round(10*time.Millisecond))

	r.timedOut = !waitAllReady(t, tl, start)
	end := time.Now()
	c1 := cpuSnapshot(r.procs)
	r.core.after, r.fn.after, r.prov.after, r.apisrv.after = e.scrapeAll(t)
	api1, _, _ := widgetAPIRequests(e.widgets.Server)
	r.cpuRun = cpuDelta(c0, c1)
	r.widgetAPI = map[string]float64{}
	for k, v := range api1 {
		if d := v - api0[k]; d > 0 {
			r.widgetAPI[k] = d
		}
	}
	r.rssKB = map[string]int{}
	for _, p := range r.procs {
		r.rssKB[p.name] = rssOf(p.pid)
	}

	// Ready times are final now; the other stages are collected after the
	// steady-state window, since some (a WidgetKey's Ready) come after the
	// object's.
	tl.mu.Lock()
	for name, at := range sent {
		k := r.kindOf(name)
		if ra, ok := tl.at[name][k.kind.final]; ok && !ra.After(end) {
			r.toReady = append(r.toReady, ra.Sub(at))
			k.toReady = append(k.toReady, ra.Sub(at))
			k.allReady = max(k.allReady, ra.Sub(start))
		}
	}
	tl.mu.Unlock()
	r.ready = len(r.toReady)
	r.allReady, r.end = end.Sub(start), end
	for _, k := range r.kinds {
		k.ready = len(k.toReady)
		if k.ready < k.n {
			k.allReady = r.allReady
		}
	}
	t.Logf("e2e: %d of %d %s Ready in %s", r.ready, r.n, r.many(), r.allReady.Round(10*time.Millisecond))
	return sent, end
}

// waitAllReady waits until every object of tl is Ready, logging the
// progress every 15 s, and reports false when e2eWait passes first.
func waitAllReady(t *testing.T, tl *timeline, start time.Time) bool {
	t.Helper()
	deadline := time.After(e2eWait)
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tl.done:
			return true
		case <-deadline:
			return false
		case <-tick.C:
			t.Logf("e2e: %s after %s", tl.progress(), time.Since(start).Round(time.Second))
		}
	}
}

// measureSteady measures the steady-state window: r.steady with all
// objects (or those that got there) Ready and nothing changing.
func (r *e2eRun) measureSteady(t *testing.T, e *e2eEnv) {
	t.Helper()
	r.coreSty.before, r.fnSty.before, _, r.apisrvSty.before = e.scrapeAll(t)
	_, tot0, _ := widgetAPIRequests(e.widgets.Server)
	c0 := cpuSnapshot(r.procs)
	time.Sleep(r.steady)
	c1 := cpuSnapshot(r.procs)
	r.coreSty.after, r.fnSty.after, _, r.apisrvSty.after = e.scrapeAll(t)
	_, tot1, _ := widgetAPIRequests(e.widgets.Server)
	r.cpuSty = cpuDelta(c0, c1)
	r.widgetAPISty = tot1 - tot0
}

// explainNotReady records the state of the objects that are not Ready.
func (r *e2eRun) explainNotReady(ctx context.Context, t *testing.T, e *e2eEnv, sent map[string]time.Time, tl *timeline) {
	t.Helper()
	for _, k := range r.kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.kind.gvk.GroupVersion().WithKind(k.kind.gvk.Kind + "List"))
		if err := e.kube.List(ctx, l, client.InNamespace(e2eNamespace)); err != nil {
			t.Logf("cannot list %s: %v", k.kind.many, err)
			continue
		}
		tl.mu.Lock()
		for i := range l.Items {
			c := &l.Items[i]
			if _, ok := sent[c.GetName()]; !ok || claimReady(c) {
				continue
			}
			last := "created"
			for _, s := range k.kind.stages {
				if _, ok := tl.at[c.GetName()][s]; ok {
					last = s
				}
			}
			line := platform.StatusLine(c)
			line = strings.TrimPrefix(line, c.GetKind()+" "+platform.Name(c)+":")
			k.notReady["last stage "+last+";"+line]++
		}
		tl.mu.Unlock()
	}
	if d, err := e.c.DumpDiagnostics(ctx, ""); err == nil {
		t.Logf("e2e: diagnostics in %s", d)
	}
}

// countReady counts, by kind, the run's objects in the benchmark's
// namespace that are Ready.
func (e *e2eEnv) countReady(ctx context.Context, t *testing.T, r *e2eRun) {
	for _, k := range r.kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.kind.gvk.GroupVersion().WithKind(k.kind.gvk.Kind + "List"))
		if err := e.kube.List(ctx, l, client.InNamespace(e2eNamespace)); err != nil {
			t.Logf("cannot list %s: %v", k.kind.many, err)
			k.readyEnd = -1
			continue
		}
		k.readyEnd = 0
		for i := range l.Items {
			if claimReady(&l.Items[i]) {
				k.readyEnd++
			}
		}
	}
}

// claimReady is the e2e suite's test, for claims and XRs: Synced and Ready.
func claimReady(u *unstructured.Unstructured) bool {
	return condTrue(u, "Synced") && condTrue(u, "Ready")
}

func condTrue(u *unstructured.Unstructured, typ string) bool {
	return platform.GetCondition(u, typ).Status == "True"
}
