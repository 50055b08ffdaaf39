package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func init() { register(40, "e2e", e2eSection) }

// Knobs and fixed conditions of the end-to-end run.
const (
	e2eToken     = "bench-token"
	e2eNamespace = "bench-e2e"
	e2eWarmupNS  = "bench-e2e-warmup"
	e2eWorkers   = 4
	// e2eWait bounds the wait for all claims: past it the section reports
	// how far they got instead of failing.
	e2eWait = 10 * time.Minute
	// e2eIdle is the window before the claims in which each process's idle
	// CPU use is measured.
	e2eIdle = 10 * time.Second
)

// The kinds the run watches: the app team's claim, the legacy XR it binds
// and the cluster-scoped managed resources the function composes.
var (
	gvkClaim     = schema.GroupVersionKind{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Kind: "WidgetClaim"}
	gvkLegacyXR  = schema.GroupVersionKind{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Kind: "XWidget"}
	gvkWidget    = schema.GroupVersionKind{Group: "widget.widgetco.io", Version: "v1alpha1", Kind: "Widget"}
	gvkWidgetKey = schema.GroupVersionKind{Group: "widget.widgetco.io", Version: "v1alpha1", Kind: "WidgetKey"}
)

// The stages of a claim, in order, from its create request to Ready.
const (
	stXR          = "XR created"
	stWidget      = "Widget created"
	stWidgetReady = "Widget Ready"
	stKey         = "WidgetKey created"
	stKeyReady    = "WidgetKey Ready"
	stXRReady     = "XR Ready"
	stReady       = "claim Ready"
)

var e2eStages = []string{stXR, stWidget, stWidgetReady, stKey, stKeyReady, stXRReady, stReady}

// e2eSection: N claims to Ready on the local control plane (test/harness,
// as the e2e suite and make demo run it), with the CPU time every process
// of the control plane spends on them.
func e2eSection(t *testing.T, b *bench) string {
	n := envInt("WIDGET_BENCH_E2E_N", 100)
	runs := envInt("WIDGET_BENCH_E2E_RUNS", 1)
	steady := time.Duration(envInt("WIDGET_BENCH_E2E_STEADY_SECONDS", 60)) * time.Second
	// controller-runtime's clients log API warnings through its logger.
	ctrllog.SetLogger(logr.Discard())
	rs := make([]*e2eRun, 0, runs)
	var env *e2eEnv
	for i := range runs {
		// A fresh control plane each run, so that runs are alike.
		env = startE2E(t, b)
		r := env.run(t, n, steady)
		env.stop()
		t.Logf("e2e run %d: %d of %d Ready in %s, p50 %s, p99 %s", i+1, r.ready, n, r.allReady.Round(10*time.Millisecond),
			quantile(r.toReady, .5).Round(10*time.Millisecond), quantile(r.toReady, .99).Round(10*time.Millisecond))
		rs = append(rs, r)
	}
	return e2eMarkdown(t, b, env, rs)
}

// e2eEnv is a local control plane with provider-widget and function-widget
// installed and the XWidget API published.
type e2eEnv struct {
	h       *harness.Harness
	p       *platform.Platform
	kube    client.WithWatch
	cfg     *rest.Config
	pkgs    platform.Packages
	dir     string
	root    string
	kcm     bool
	fnAddr  string // function-widget's metrics address
	provBin string
	setup   time.Duration
}

func startE2E(t *testing.T, b *bench) *e2eEnv {
	t.Helper()
	begin := time.Now()
	tools, err := harness.ToolsFromEnv()
	if err != nil {
		t.Fatalf("the e2e section needs the tools (eval \"$(bash hack/tools.sh env)\"): %v", err)
	}
	// The binaries of the working tree, as the packages' runtimes.
	bins := platform.Binaries{
		Provider: b.build(t, "provider-widget", "./provider"),
		Function: b.build(t, "function-widget", "./function"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pkgs, err := platform.FindPackages(ctx, b.root, tools.Crank, filepath.Join(b.dir, "packages"))
	if err != nil {
		t.Fatal(err)
	}
	// Kept after the run (replaced by the next) for its logs.
	dir := filepath.Join(b.root, "_output", "bench", "e2e-harness")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := harness.Start(context.Background(), harness.Options{
		Dir:   dir,
		Log:   log,
		Tools: &tools,
		// As the e2e suite: platform.Install creates the provider's policy.
		Activations: []string{},
		CoreArgs:    envArgs("WIDGET_BENCH_E2E_CORE_ARGS"),
		WidgetAPI:   &server.Options{Tokens: map[string]string{e2eToken: "bench"}},
	})
	if err != nil {
		t.Fatalf("cannot start the local control plane: %v", err)
	}
	env := &e2eEnv{h: h, pkgs: pkgs, dir: dir, root: b.root, provBin: bins.Provider, kcm: tools.KubeControllerManager != ""}
	ok := false
	defer func() {
		if !ok {
			env.stop()
		}
	}()
	env.p, err = platform.Install(ctx, h, platform.Options{
		Root: b.root, Binaries: bins, Packages: pkgs, Token: e2eToken, Log: log,
		ProviderArgs: envArgs("WIDGET_BENCH_E2E_PROVIDER_ARGS"),
	})
	if err != nil {
		t.Fatalf("cannot install the platform (logs in %s): %v", filepath.Join(dir, "logs"), err)
	}
	env.cfg = h.RESTConfig()
	env.cfg.QPS, env.cfg.Burst = 500, 1000 // measure the control plane, not our client's limiter
	env.cfg.WarningHandler = rest.NoWarnings{}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if env.kube, err = client.NewWithWatch(env.cfg, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	env.fnAddr = cmdlineFlag(env.p.Function.PID(), "--metrics-address")
	env.setup = time.Since(begin)
	ok = true
	return env
}

// providerRate is the provider's --max-reconcile-rate in this run: the
// flag's value from WIDGET_BENCH_E2E_PROVIDER_ARGS, or the default that the
// binary's --help shows.
func providerRate(bin string) string {
	args := envArgs("WIDGET_BENCH_E2E_PROVIDER_ARGS")
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--max-reconcile-rate="); ok {
			return v
		}
		if a == "--max-reconcile-rate" && i+1 < len(args) {
			return args[i+1]
		}
	}
	out, _ := exec.Command(bin, "--help").Output()
	if m := regexp.MustCompile(`--max-reconcile-rate=(\S+)`).FindSubmatch(out); m != nil {
		return string(m[1]) + " (the default)"
	}
	return "its default"
}

// envArgs splits an environment variable into flags.
func envArgs(name string) []string { return strings.Fields(os.Getenv(name)) }

// flagsNote describes the extra flags a knob added.
func flagsNote(name, what string) string {
	if a := os.Getenv(name); strings.TrimSpace(a) != "" {
		return fmt.Sprintf(" %s with `%s` (`%s`)", what, strings.TrimSpace(a), name)
	}
	return ""
}

func (e *e2eEnv) stop() {
	if err := e.h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cannot stop the local control plane:", err)
	}
}

// e2eRun is the outcome of one run.
type e2eRun struct {
	n, ready  int
	warmup    time.Duration // the first claim, cold, to Ready
	createFor time.Duration
	allReady  time.Duration // first create sent to the last claim Ready (or to giving up)
	timedOut  bool
	toReady   []time.Duration
	stages    map[string][]time.Duration // stage -> per claim Ready, from its create request
	gaps      map[string][]time.Duration // stage -> per claim Ready, from the stage before
	notReady  map[string]int             // how the claims that never got Ready ended, by status
	slowest   string                     // the slowest claim's stage times
	inverted  int                        // claims whose XR was seen Ready after the claim
	flaps     map[string]int             // stage -> times a Ready stage was lost again
	flapped   map[string]int             // stage -> claims that lost it
	readyEnd  int                        // claims Ready at the end of the steady-state window
	relists   []string                   // the benchmark's watches that had to re-list
	xrLag     []time.Duration            // XR first seen Ready by the watch, after its lastTransitionTime

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
}

// metricDelta is the difference of two scrapes of a metrics endpoint.
type metricDelta struct{ before, after map[string]float64 }

func (d metricDelta) sum(name string, match ...string) float64 {
	return metricSum(d.after, name, match...) - metricSum(d.before, name, match...)
}

func (d metricDelta) by(name, label string, match ...string) map[string]float64 {
	a, b := metricBy(d.after, name, label, match...), metricBy(d.before, name, label, match...)
	for k, v := range b {
		a[k] -= v
	}
	return a
}

func (e *e2eEnv) run(t *testing.T, n int, steady time.Duration) *e2eRun {
	t.Helper()
	ctx := context.Background()
	r := &e2eRun{n: n, idle: e2eIdle, steady: steady, stages: map[string][]time.Duration{}, gaps: map[string][]time.Duration{}, notReady: map[string]int{}}
	example, err := platform.ReadObjects(filepath.Join(e.root, "examples", "composition", "legacy", "claim.yaml"))
	if err != nil || len(example) != 1 {
		t.Fatalf("cannot read examples/composition/legacy/claim.yaml: %v", err)
	}
	claim := func(ns, name string) *unstructured.Unstructured {
		u := example[0].DeepCopy()
		u.SetNamespace(ns)
		u.SetName(name)
		_ = unstructured.SetNestedField(u.Object, name+"-widget", "spec", "writeConnectionSecretToRef", "name")
		return u
	}
	for _, ns := range []string{e2eWarmupNS, e2eNamespace} {
		if err := platform.EnsureNamespace(ctx, e.h.Client(), ns); err != nil {
			t.Fatal(err)
		}
	}

	// Warm up: one claim, cold, to Ready. Core starts its watches of the
	// composed kinds and dials the function on first use.
	w := claim(e2eWarmupNS, "warmup")
	t0 := time.Now()
	if err := e.kube.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	for {
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(w), w); err == nil && claimReady(w) {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			t.Fatalf("the warm-up claim is not Ready after 5m: %s (logs in %s)", platform.StatusLine(w), filepath.Join(e.dir, "logs"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.warmup = time.Since(t0)
	t.Logf("e2e: warm-up claim Ready in %s", r.warmup.Round(10*time.Millisecond))

	// The processes, and how much CPU they use doing nothing.
	r.procs = e.processes(t)
	time.Sleep(5 * time.Second) // let the warm-up's last reconciles pass
	c0 := cpuSnapshot(r.procs)
	time.Sleep(r.idle)
	c1 := cpuSnapshot(r.procs)
	r.cpuIdl = cpuDelta(c0, c1)

	// Watches of every stage, started before the claims.
	tl := newTimeline(n)
	wctx, cancelWatches := context.WithCancel(ctx)
	defer cancelWatches()
	var wg sync.WaitGroup
	var rmu sync.Mutex
	byClaim := func(stage string, ready bool) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			l := u.GetLabels()
			if l["crossplane.io/claim-namespace"] != e2eNamespace {
				return
			}
			tl.set(l["crossplane.io/claim-name"], stage, !ready || condTrue(u, "Ready"))
		}
	}
	for _, wt := range []struct {
		gvk schema.GroupVersionKind
		ns  string
		see func(u *unstructured.Unstructured)
	}{
		{gvkClaim, e2eNamespace, func(u *unstructured.Unstructured) {
			tl.set(u.GetName(), stReady, claimReady(u))
		}},
		{gvkLegacyXR, "", func(u *unstructured.Unstructured) {
			byClaim(stXR, false)(u)
			byClaim(stXRReady, true)(u)
		}},
		{gvkWidget, "", func(u *unstructured.Unstructured) {
			byClaim(stWidget, false)(u)
			byClaim(stWidgetReady, true)(u)
		}},
		{gvkWidgetKey, "", func(u *unstructured.Unstructured) {
			byClaim(stKey, false)(u)
			byClaim(stKeyReady, true)(u)
		}},
	} {
		wg.Go(func() {
			n, why := watchKind(wctx, t, e.kube, wt.gvk, wt.ns, wt.see)
			if n > 0 {
				rmu.Lock()
				r.relists = append(r.relists, fmt.Sprintf("%s %d (first: %s)", wt.gvk.Kind, n, why))
				rmu.Unlock()
			}
		})
	}
	time.Sleep(time.Second) // let the watches list

	// The run: n claims by a few concurrent clients.
	r.core.before, r.fn.before, r.prov.before, r.apisrv.before = e.scrapeAll(t)
	api0, _ := widgetAPIRequests(e.h.WidgetAPI().Server)
	c0 = cpuSnapshot(r.procs)
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	work := make(chan int)
	var cw sync.WaitGroup
	start := time.Now()
	for range e2eWorkers {
		cw.Go(func() {
			for i := range work {
				c := claim(e2eNamespace, fmt.Sprintf("c-%04d", i))
				at := time.Now()
				if err := e.kube.Create(ctx, c); err != nil {
					t.Errorf("cannot create claim %s: %v", c.GetName(), err)
					continue
				}
				mu.Lock()
				sent[c.GetName()] = at
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	cw.Wait()
	r.createFor = time.Since(start)
	t.Logf("e2e: %d claims created in %s", len(sent), r.createFor.Round(10*time.Millisecond))

	deadline := time.After(e2eWait)
	tick := time.NewTicker(15 * time.Second)
wait:
	for {
		select {
		case <-tl.done:
			break wait
		case <-deadline:
			r.timedOut = true
			break wait
		case <-tick.C:
			t.Logf("e2e: %s after %s", tl.progress(), time.Since(start).Round(time.Second))
		}
	}
	tick.Stop()
	end := time.Now()
	c1 = cpuSnapshot(r.procs)
	r.core.after, r.fn.after, r.prov.after, r.apisrv.after = e.scrapeAll(t)
	api1, _ := widgetAPIRequests(e.h.WidgetAPI().Server)
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

	// Claim Ready times are final now; the other stages are collected
	// after the steady-state window, since some (a WidgetKey's Ready) come
	// after the claim's.
	tl.mu.Lock()
	for name, at := range sent {
		if ra, ok := tl.at[name][stReady]; ok && !ra.After(end) {
			r.toReady = append(r.toReady, ra.Sub(at))
		}
	}
	tl.mu.Unlock()
	r.ready = len(r.toReady)
	r.allReady = end.Sub(start)
	t.Logf("e2e: %d of %d claims Ready in %s", r.ready, n, r.allReady.Round(10*time.Millisecond))
	if r.timedOut {
		r.explainNotReady(ctx, t, e, sent, tl)
	}

	// Steady state: all (or what got) Ready, nothing changing.
	if steady > 0 {
		r.coreSty.before, r.fnSty.before, _, r.apisrvSty.before = e.scrapeAll(t)
		_, tot0 := widgetAPIRequests(e.h.WidgetAPI().Server)
		c0 := cpuSnapshot(r.procs)
		time.Sleep(steady)
		c1 := cpuSnapshot(r.procs)
		r.coreSty.after, r.fnSty.after, _, r.apisrvSty.after = e.scrapeAll(t)
		_, tot1 := widgetAPIRequests(e.h.WidgetAPI().Server)
		r.cpuSty = cpuDelta(c0, c1)
		r.widgetAPISty = tot1 - tot0
	}
	cancelWatches()
	wg.Wait()
	r.collectStages(sent, tl, end)
	r.readyEnd = e.countReady(ctx, t)
	r.xrLag = e.xrWatchLag(ctx, t, tl)
	return r
}

// countReady counts the claims in the benchmark's namespace that are Ready.
func (e *e2eEnv) countReady(ctx context.Context, t *testing.T) int {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvkClaim.GroupVersion().WithKind(gvkClaim.Kind + "List"))
	if err := e.kube.List(ctx, l, client.InNamespace(e2eNamespace)); err != nil {
		t.Logf("cannot list claims: %v", err)
		return -1
	}
	n := 0
	for i := range l.Items {
		if claimReady(&l.Items[i]) {
			n++
		}
	}
	return n
}

// xrWatchLag returns, for each XR that became Ready once and stayed so, how
// long after its Ready condition's lastTransitionTime (a second's
// resolution) the benchmark's watch first saw it Ready.
func (e *e2eEnv) xrWatchLag(ctx context.Context, t *testing.T, tl *timeline) []time.Duration {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvkLegacyXR.GroupVersion().WithKind(gvkLegacyXR.Kind + "List"))
	if err := e.kube.List(ctx, l); err != nil {
		t.Logf("cannot list XRs: %v", err)
		return nil
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []time.Duration
	for i := range l.Items {
		x := &l.Items[i]
		c := x.GetLabels()["crossplane.io/claim-name"]
		seen, ok := tl.at[c][stXRReady]
		if x.GetLabels()["crossplane.io/claim-namespace"] != e2eNamespace || !ok || tl.flappy[stXRReady][c] > 0 {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(x.Object, "status", "conditions")
		for _, ci := range cs {
			m, _ := ci.(map[string]any)
			if m["type"] != "Ready" || m["status"] != "True" {
				continue
			}
			s, _ := m["lastTransitionTime"].(string)
			if ltt, err := time.Parse(time.RFC3339, s); err == nil {
				out = append(out, max(seen.Sub(ltt)-time.Second, 0))
			}
		}
	}
	return out
}

// e2ePath is the order in which a claim's stages happen: each follows the
// one before it. A WidgetKey's Ready follows its creation but is off the
// path (the function waits for the key's connection details, not for its
// Ready condition).
var e2ePath = []string{stXR, stWidget, stWidgetReady, stKey, stXRReady, stReady}

// collectStages records, per claim Ready by end, the time from its create
// request to each stage and from the stage before it.
func (r *e2eRun) collectStages(sent map[string]time.Time, tl *timeline, end time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	r.flaps, r.flapped = maps.Clone(tl.flaps), map[string]int{}
	for s, cs := range tl.flappy {
		r.flapped[s] = len(cs)
	}
	var slowestAt time.Duration
	for name, at := range sent {
		st := tl.at[name]
		ra, ok := st[stReady]
		if !ok || ra.After(end) {
			continue
		}
		for _, s := range e2eStages {
			ts, ok := st[s]
			if !ok {
				continue
			}
			r.stages[s] = append(r.stages[s], ts.Sub(at))
			prev := at
			if s == stKeyReady {
				prev = st[stKey]
			} else if i := slices.Index(e2ePath, s); i > 0 {
				if p, ok := st[e2ePath[i-1]]; ok {
					prev = p
				}
			}
			r.gaps[s] = append(r.gaps[s], ts.Sub(prev))
		}
		if xr, ok := st[stXRReady]; ok && xr.After(ra) {
			r.inverted++
		}
		if d := ra.Sub(at); d > slowestAt {
			slowestAt = d
			parts := make([]string, 0, len(e2eStages))
			for _, s := range e2eStages {
				if ts, ok := st[s]; ok {
					parts = append(parts, fmt.Sprintf("%s %s", s, secs(ts.Sub(at))))
				}
			}
			r.slowest = name + ": " + strings.Join(parts, ", ")
		}
	}
}

// explainNotReady records the state of the claims that are not Ready.
func (r *e2eRun) explainNotReady(ctx context.Context, t *testing.T, e *e2eEnv, sent map[string]time.Time, tl *timeline) {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvkClaim.GroupVersion().WithKind(gvkClaim.Kind + "List"))
	if err := e.kube.List(ctx, l, client.InNamespace(e2eNamespace)); err != nil {
		t.Logf("cannot list claims: %v", err)
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := range l.Items {
		c := &l.Items[i]
		if _, ok := sent[c.GetName()]; !ok || claimReady(c) {
			continue
		}
		last := "created"
		for _, s := range e2eStages {
			if _, ok := tl.at[c.GetName()][s]; ok {
				last = s
			}
		}
		line := platform.StatusLine(c)
		line = strings.TrimPrefix(line, c.GetKind()+" "+platform.Name(c)+":")
		r.notReady["last stage "+last+";"+line]++
	}
	if d, err := e.h.DumpDiagnostics(ctx, ""); err == nil {
		t.Logf("e2e: diagnostics in %s", d)
	}
}

// e2eMarkdown writes the section: the conditions, a row per run, and the
// details of the last run.
func e2eMarkdown(t *testing.T, b *bench, e *e2eEnv, rs []*e2eRun) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	r := rs[len(rs)-1]

	w("## End to end: %d claims to Ready on the local control plane\n\n", r.n)
	w("`WIDGET_BENCH_ONLY=e2e`; N from `WIDGET_BENCH_E2E_N` (default 100), runs from `WIDGET_BENCH_E2E_RUNS` (default 1).\n")
	w("The local control plane of `make demo` and the e2e suite (test/harness, set up by test/lib/platform as the\n")
	w("suite does), started afresh for each run: envtest kube-apiserver v1.35.4 + etcd, ")
	if e.kcm {
		w("kube-controller-manager (garbage\ncollector and namespace controllers), ")
	}
	w("Crossplane core v2.4.0 outside a cluster with its default flags\n")
	w("(`core start --package-runtime=External --webhook-enabled=false` plus cache, TLS and port flags; no\n")
	w("`--debug`)%s, and provider-widget and function-widget installed through Crossplane's package manager from\n", flagsNote("WIDGET_BENCH_E2E_CORE_ARGS", "and"))
	w("%s, their runtimes played by the harness: the binaries of the working tree (`go build`) with\n", pkgNames(e.pkgs))
	w("default flags apart from metrics and health addresses (no `--debug`)%s. The XWidget APIs and ProviderConfigs\n", flagsNote("WIDGET_BENCH_E2E_PROVIDER_ARGS", ", the provider"))
	w("come from examples/ (legacy Composition: one function-widget step%s). The reference Widget API runs in the\n", compositionTTL(e.root))
	w("benchmark's process with **zero provisioning delay and no rate limit**, so what is measured is the control\n")
	w("plane, not the cloud.\n\n")
	w("Each run: one warm-up claim goes to Ready first (cold, which includes core starting its watches of the\n")
	w("composed kinds and dialling the function). Then %d `WidgetClaim`s, `examples/composition/legacy/claim.yaml`\n", r.n)
	w("renamed (small widget in eu-west-1, one access key, its own connection Secret), are created in one namespace\n")
	w("by %d concurrent clients; watches record when each claim is first Synced=True and Ready=True, and when its XR\n", e2eWorkers)
	w("and its composed Widget and WidgetKey appear and become Ready. Time-to-Ready is from the claim's create\n")
	w("request to that watch event. CPU time is utime+stime from `/proc/<pid>/stat` of each process, from just before\n")
	w("the first create to the moment the last claim is Ready. Then %s of steady state with all claims Ready.\n\n", secs(r.steady))

	w("| run | warm-up claim | claims Ready | all Ready | claims Ready/s | time-to-Ready p50 | p90 | p99 | max | CPU/claim: core | function | provider | kube-apiserver | all | RunFunction calls/claim | steady state: RunFunction calls/min | kube-apiserver CPU |\n")
	w("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	cols := []func(r *e2eRun) float64{
		func(r *e2eRun) float64 { return r.warmup.Seconds() },
		func(r *e2eRun) float64 { return float64(r.ready) },
		func(r *e2eRun) float64 { return r.allReady.Seconds() },
		func(r *e2eRun) float64 { return float64(r.ready) / r.allReady.Seconds() },
		func(r *e2eRun) float64 { return quantile(r.toReady, .5).Seconds() },
		func(r *e2eRun) float64 { return quantile(r.toReady, .9).Seconds() },
		func(r *e2eRun) float64 { return quantile(r.toReady, .99).Seconds() },
		func(r *e2eRun) float64 { return quantile(r.toReady, 1).Seconds() },
		func(r *e2eRun) float64 { return r.cpuPerClaimMS(procCore) },
		func(r *e2eRun) float64 { return r.cpuPerClaimMS(procFunction) },
		func(r *e2eRun) float64 { return r.cpuPerClaimMS(procProvider) },
		func(r *e2eRun) float64 { return r.cpuPerClaimMS(procAPIServer) },
		func(r *e2eRun) float64 { return r.cpuPerClaimMS("") },
		func(r *e2eRun) float64 { return r.core.sum("function_run_function_request_total") / float64(r.n) },
		func(r *e2eRun) float64 {
			return r.coreSty.sum("function_run_function_request_total") / max(r.steady.Minutes(), 1e-9)
		},
		func(r *e2eRun) float64 {
			return 100 * r.cpuSty[procAPIServer].Seconds() / max(r.steady.Seconds(), 1e-9)
		},
	}
	formats := []string{"%.2f s", "%.0f", "%.2f s", "%.2f", "%.2f s", "%.2f s", "%.2f s", "%.2f s", "%.0f ms", "%.0f ms", "%.0f ms", "%.0f ms", "%.0f ms", "%.1f", "%.0f", "%.0f%%"}
	row := func(label string, v func(i int) float64) {
		cells := make([]string, 0, len(cols))
		for i := range cols {
			cells = append(cells, fmt.Sprintf(formats[i], v(i)))
		}
		w("| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	for i, r := range rs {
		row(strconv.Itoa(i+1), func(c int) float64 { return cols[c](r) })
	}
	if len(rs) > 1 {
		row("**median**", func(c int) float64 {
			vs := make([]float64, 0, len(rs))
			for _, r := range rs {
				vs = append(vs, cols[c](r))
			}
			return medianF(vs)
		})
	}
	w("\nSteady-state kube-apiserver CPU is %% of one core. ")
	if len(rs) > 1 {
		w("The details below are of run %d, the last.", len(rs))
	}
	w("\n\n")
	w("### Run %d in detail\n\n", len(rs))
	w("Warm-up claim Ready in %s; %d claims created in %s.\n\n", secs(r.warmup), r.n, secs(r.createFor))
	w("%s", r.details(t, b, e))
	return doc.String()
}

// Names of the processes in procCPU.
const (
	procCore      = "Crossplane core"
	procFunction  = "function-widget"
	procProvider  = "provider-widget"
	procAPIServer = "kube-apiserver"
)

// cpuPerClaimMS is a process's CPU time in the run per claim in ms, or all
// processes' when name is "".
func (r *e2eRun) cpuPerClaimMS(name string) float64 {
	var d time.Duration
	for k, v := range r.cpuRun {
		if name == "" || k == name {
			d += v
		}
	}
	return float64(d.Milliseconds()) / float64(r.n)
}

// compositionTTL describes the TTLs of the legacy Composition's function
// input, e.g. ", TTLs converging 15s, ready 10m".
func compositionTTL(root string) string {
	objs, err := platform.ReadObjects(filepath.Join(root, "examples", "composition", "legacy", "composition.yaml"))
	if err != nil || len(objs) == 0 {
		return ""
	}
	steps, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "pipeline")
	if len(steps) == 0 {
		return ""
	}
	step, _ := steps[0].(map[string]any)
	ttl, _, _ := unstructured.NestedStringMap(step, "input", "ttl")
	if len(ttl) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ttl))
	for _, k := range slices.Sorted(maps.Keys(ttl)) {
		parts = append(parts, k+" "+ttl[k])
	}
	return ", TTLs " + strings.Join(parts, ", ")
}

// details writes a run's details.
func (r *e2eRun) details(t *testing.T, b *bench, e *e2eEnv) string { //nolint:gocyclo // A linear report.
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	perClaim := func(v float64) float64 { return v / float64(r.n) }

	if r.timedOut {
		w("**Not all claims got Ready: %d of %d after %s.** How the others ended (last stage seen; claim status):\n\n", r.ready, r.n, secs(r.allReady))
		ks := make([]string, 0, len(r.notReady))
		for k := range r.notReady {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, func(a, b string) int { return r.notReady[b] - r.notReady[a] })
		for _, k := range ks {
			w("- %d: %s\n", r.notReady[k], strings.Replace(k, ";", ":", 1))
		}
		w("\n")
	}

	w("Where the time goes, over the %d claims that got Ready: from a claim's create request to each stage, and from\n", r.ready)
	w("the stage before it (WidgetKey Ready: from WidgetKey created). Stages are recorded until the end of the\n")
	w("steady-state window, so a stage that comes after the claim's Ready shows here too.\n\n")
	w("| stage | claims | since create p50 | p90 | max | since the stage before p50 | p90 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range e2eStages {
		ds, gs := r.stages[s], r.gaps[s]
		w("| %s | %d | %s | %s | %s | %s | %s |\n", s, len(ds), secs(quantile(ds, .5)), secs(quantile(ds, .9)), secs(quantile(ds, 1)),
			secs(quantile(gs, .5)), secs(quantile(gs, .9)))
	}
	if r.slowest != "" {
		w("\nThe slowest claim, %s.\n", r.slowest)
	}
	if r.inverted > 0 {
		w("\n**The XR Ready row is late:** for %d claims the benchmark's watch saw the XR Ready only after the claim,\n", r.inverted)
		w("yet core sets a claim Ready only once it reads its XR Ready: the watch saw it late, or missed the version\n")
		w("(a watch that falls behind is closed by the kube-apiserver, and the re-list shows only current versions).")
	}
	if len(r.xrLag) > 0 {
		if r.inverted == 0 {
			w("\n")
		}
		w(" The benchmark's watch saw XRs Ready %s (p50) and up to %s after their Ready condition's\n", secs(quantile(r.xrLag, .5)), secs(quantile(r.xrLag, 1)))
		w("lastTransitionTime, over the %d XRs that never lost Ready (lower bounds: lastTransitionTime has a second's\n", len(r.xrLag))
		w("resolution, so a second is taken off).\n")
	} else if r.inverted > 0 {
		w("\n")
	}
	var lost []string
	for _, s := range []string{stReady, stXRReady, stWidgetReady, stKeyReady} {
		if r.flaps[s] > 0 {
			lost = append(lost, fmt.Sprintf("%s lost %d times (%d claims)", s, r.flaps[s], r.flapped[s]))
		}
	}
	if len(lost) > 0 {
		w("\nReady, once reached, was lost again (a later version without it): %s. ", strings.Join(lost, ", "))
	} else {
		w("\nNo object lost Ready once it had reached it. ")
	}
	w("At the end of the steady-state window %d of %d claims were Ready.", r.readyEnd, r.n)
	if len(r.relists) > 0 {
		slices.Sort(r.relists)
		w(" The benchmark's watches had to re-list: %s.", strings.Join(r.relists, "; "))
	}
	w("\n\n")

	w("CPU time per process: during the run, per claim, and the same process's rate when idle (%s before the\n", secs(r.idle))
	w("claims, with only the warm-up claim) and at steady state (%s after the last claim was Ready, %d claims Ready).\n", secs(r.steady), r.ready+1)
	w("Wall time of the run: %s.\n\n", secs(r.allReady))
	w("| process | CPU during the run | CPU per claim | share | idle CPU | steady-state CPU | RSS at the end |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var total time.Duration
	for _, p := range r.procs {
		total += r.cpuRun[p.name]
	}
	for _, p := range r.procs {
		d := r.cpuRun[p.name]
		w("| %s | %.2f s | %.0f ms | %.0f%% | %.1f%% | %s | %s |\n", p.name, d.Seconds(), float64(d.Milliseconds())/float64(r.n),
			100*float64(d)/float64(max(total, 1)), 100*r.cpuIdl[p.name].Seconds()/r.idle.Seconds(), pctOf(r.cpuSty[p.name], r.steady), rssMB(r.rssKB[p.name]))
	}
	w("| **all** | **%.2f s** | **%.0f ms** | | | | |\n\n", total.Seconds(), float64(total.Milliseconds())/float64(r.n))
	w("Idle and steady-state CPU are %% of one core. The benchmark process runs the Widget API, the watches and the\n")
	w("clients. %s\n\n", cpuNote(r))

	// Calls per claim.
	w("Work per claim during the run (counter deltas over %d claims):\n\n", r.n)
	w("| what | per claim | source |\n| --- | ---: | --- |\n")
	rf := r.core.sum("function_run_function_request_total")
	w("| RunFunction calls (core) | %.1f | core `function_run_function_request_total` |\n", perClaim(rf))
	if h := r.fn.sum("grpc_server_handled_total", `grpc_method="RunFunction"`); h > 0 || e.fnAddr != "" {
		w("| RunFunction calls (function) | %.1f | function-widget `grpc_server_handled_total{grpc_method=\"RunFunction\"}` |\n", perClaim(h))
		for _, o := range sortedKeysDesc(r.fn.by("function_widget_compositions_total", "outcome")) {
			w("| &nbsp; of which %s | %.1f | function-widget `function_widget_compositions_total` |\n", o.k, perClaim(o.v))
		}
	}
	w("| core reconciles | %.1f | core `controller_runtime_reconcile_total` |\n", perClaim(r.core.sum("controller_runtime_reconcile_total")))
	for _, c := range topN(sortedKeysDesc(r.core.by("controller_runtime_reconcile_total", "controller")), 5) {
		w("| &nbsp; %s | %.1f | |\n", c.k, perClaim(c.v))
	}
	w("| core requests to kube-apiserver | %.1f | core `rest_client_requests_total` |\n", perClaim(r.core.sum("rest_client_requests_total")))
	for _, c := range sortedKeysDesc(r.core.by("rest_client_requests_total", "code")) {
		if c.k != "200" && c.k != "201" {
			w("| &nbsp; answered %s | %.1f | |\n", c.k, perClaim(c.v))
		}
	}
	provRecs := r.prov.sum("controller_runtime_reconcile_total")
	w("| provider reconciles | %.1f | provider `controller_runtime_reconcile_total` |\n", perClaim(provRecs))
	w("| provider requests to kube-apiserver | %.1f | provider `rest_client_requests_total` |\n", perClaim(r.prov.sum("rest_client_requests_total")))
	var api float64
	for _, v := range r.widgetAPI {
		api += v
	}
	w("| provider requests to the Widget API | %.1f | Widget API `widgetapi_requests_total` |\n", perClaim(api))
	for _, c := range topN(sortedKeysDesc(r.widgetAPI), 5) {
		w("| &nbsp; %s | %.1f | |\n", c.k, perClaim(c.v))
	}
	if len(r.apisrv.after) > 0 {
		w("| kube-apiserver requests, all clients | %.1f | kube-apiserver `apiserver_request_total` |\n", perClaim(r.apisrv.sum("apiserver_request_total")))
		for _, c := range sortedKeysDesc(r.apisrv.by("apiserver_request_total", "code")) {
			if c.k == "409" || c.k == "422" || strings.HasPrefix(c.k, "5") {
				w("| &nbsp; answered %s | %.1f | |\n", c.k, perClaim(c.v))
			}
		}
		for _, c := range topN(apiserverRequests(r.apisrv), 8) {
			w("| &nbsp; %s | %.1f | |\n", c.k, perClaim(c.v))
		}
	}
	w("\nOn average during the run core reconciled %.1f times a second, and provider-widget %.1f times a second\n",
		r.core.sum("controller_runtime_reconcile_total")/r.allReady.Seconds(), provRecs/r.allReady.Seconds())
	w("(its `--max-reconcile-rate` caps it at %s a second, across all its controllers).\n\n", providerRate(e.provBin))
	if r.steady > 0 {
		w("At steady state (%s, %d claims Ready): %.0f RunFunction calls, %.0f core reconciles, %.0f Widget API requests",
			secs(r.steady), r.ready+1, r.coreSty.sum("function_run_function_request_total"),
			r.coreSty.sum("controller_runtime_reconcile_total"), r.widgetAPISty)
		if top := topN(apiserverRequests(r.apisrvSty), 5); len(top) > 0 {
			parts := make([]string, 0, len(top))
			for _, c := range top {
				parts = append(parts, fmt.Sprintf("%s %.0f", c.k, c.v))
			}
			w("; kube-apiserver requests, most frequent first: %s", strings.Join(parts, ", "))
		}
		w(".\n\n")
	}

	if len(r.toReady) > 0 {
		png := filepath.Join(b.docDir, "benchmarks-e2e-time-to-ready.png")
		if err := writeHistogram(png, r.toReady); err != nil {
			t.Errorf("cannot write %s: %v", png, err)
		} else {
			w("![Time-to-Ready of %d claims](%s)\n\n", r.ready, filepath.Base(png))
			w("Time-to-Ready of the %d claims: %s; x axis 0 to %s (the slowest), one bar per 1/40 of it; y axis: claims\n", r.ready, filepath.Base(png), secs(quantile(r.toReady, 1)))
			w("per bar, scaled to the tallest. Grid lines every 1/4 of each axis.\n\n")
		}
	}
	w("Setting up (build, start, install, publish) took %s; the harness's logs are in `_output/bench/e2e-harness/logs`.\n", secs(e.setup))
	return doc.String()
}

// apiserverRequests is kube-apiserver's requests by verb and resource, most
// frequent first.
func apiserverRequests(d metricDelta) []kv {
	by := map[string]float64{}
	for k, v := range d.after {
		if metricName(k) != "apiserver_request_total" {
			continue
		}
		key := label(k, "verb") + " " + label(k, "resource")
		if sr := label(k, "subresource"); sr != "" {
			key += "/" + sr
		}
		by[key] += v - d.before[k]
	}
	return sortedKeysDesc(by)
}

// cpuNote says what the CPU figures are worth.
func cpuNote(r *e2eRun) string {
	var idle time.Duration
	for _, d := range r.cpuIdl {
		idle += d
	}
	bg := time.Duration(float64(idle) / r.idle.Seconds() * r.allReady.Seconds())
	return fmt.Sprintf("At the idle rate the processes together would have used %.2f s in the run's %s anyway; the per-claim figures include it.", bg.Seconds(), secs(r.allReady))
}

func pctOf(d, over time.Duration) string {
	if over <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*d.Seconds()/over.Seconds())
}

func rssMB(kb int) string {
	if kb <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MB", float64(kb)/1024)
}

func pkgNames(p platform.Packages) string {
	if p.Built {
		return "minimal packages built from package/ with crank"
	}
	return "`_output/xpkg/" + filepath.Base(p.Provider) + "` and `" + filepath.Base(p.Function) + "`"
}

// claimReady is the e2e suite's test: Synced and Ready.
func claimReady(u *unstructured.Unstructured) bool {
	return condTrue(u, "Synced") && condTrue(u, "Ready")
}

func condTrue(u *unstructured.Unstructured, typ string) bool {
	return platform.GetCondition(u, typ).Status == "True"
}

// timeline records when each claim first reached each stage.
type timeline struct {
	mu    sync.Mutex
	n     int
	at    map[string]map[string]time.Time
	ready int
	done  chan struct{}
	// A Ready stage that was reached and then lost: the object went back
	// to Ready=False (or, for claims, Synced=False).
	now    map[string]bool           // claim/stage -> reached as of the last version seen
	flaps  map[string]int            // stage -> times lost
	flappy map[string]map[string]int // stage -> claim -> times lost
}

func newTimeline(n int) *timeline {
	return &timeline{
		n: n, at: map[string]map[string]time.Time{}, done: make(chan struct{}),
		now: map[string]bool{}, flaps: map[string]int{}, flappy: map[string]map[string]int{},
	}
}

// set records that a version of the claim's object at stage was seen that
// has (ok) or lacks the stage's condition.
func (tl *timeline) set(claim, stage string, ok bool) {
	if claim == "" {
		return
	}
	if ok {
		tl.mark(claim, stage)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	k := claim + "/" + stage
	if !ok && tl.now[k] {
		tl.flaps[stage]++
		if tl.flappy[stage] == nil {
			tl.flappy[stage] = map[string]int{}
		}
		tl.flappy[stage][claim]++
	}
	tl.now[k] = ok
}

func (tl *timeline) mark(claim, stage string) {
	if claim == "" {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	st := tl.at[claim]
	if st == nil {
		st = map[string]time.Time{}
		tl.at[claim] = st
	}
	if _, ok := st[stage]; ok {
		return
	}
	st[stage] = now
	if stage == stReady {
		tl.ready++
		if tl.ready == tl.n {
			close(tl.done)
		}
	}
}

// progress counts the claims at each stage.
func (tl *timeline) progress() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	parts := make([]string, 0, len(e2eStages))
	for _, s := range e2eStages {
		c := 0
		for _, st := range tl.at {
			if _, ok := st[s]; ok {
				c++
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d", s, c))
	}
	return strings.Join(parts, ", ")
}

// watchKind lists and watches the objects of a kind (in ns, or all) and
// calls see with every version it sees, until ctx is done.
// It returns how often it had to list again because a watch ended (a
// re-list shows only the current version of each object, not the versions
// in between) and why the first such watch ended.
func watchKind(ctx context.Context, t *testing.T, kube client.WithWatch, gvk schema.GroupVersionKind, ns string, see func(u *unstructured.Unstructured)) (int, string) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	relists, why := -1, ""
	for ctx.Err() == nil {
		relists++
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		if err := kube.List(ctx, l, opts...); err != nil {
			if ctx.Err() == nil {
				t.Logf("cannot list %s: %v", gvk.Kind, err)
				time.Sleep(time.Second)
			}
			continue
		}
		for i := range l.Items {
			see(&l.Items[i])
		}
		wl := &unstructured.UnstructuredList{}
		wl.SetGroupVersionKind(listGVK)
		wi, err := kube.Watch(ctx, wl, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})...)
		if err != nil {
			continue
		}
		ended := "the server closed it"
		for ev := range wi.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				see(u)
			}
			if st, ok := ev.Object.(*metav1.Status); ok && ev.Type == watch.Error {
				ended = st.Message
			}
		}
		wi.Stop()
		if why == "" && ctx.Err() == nil {
			why = ended
		}
	}
	return max(relists, 0), why
}

// procCPU is a process of the control plane whose CPU time is measured.
type procCPU struct {
	name string
	pid  int
}

// processes finds the control plane's processes: those the harness runs
// and, by their command lines, the ones envtest runs.
func (e *e2eEnv) processes(t *testing.T) []procCPU {
	t.Helper()
	ps := []procCPU{
		{procCore, e.h.Core().PID()},
		{procFunction, e.p.Function.PID()},
		{procProvider, e.p.Provider.PID()},
	}
	port := ""
	if u, err := url.Parse(e.cfg.Host); err == nil {
		port = u.Port()
	}
	for _, f := range []struct {
		name, exe, arg string
	}{
		{procAPIServer, "kube-apiserver", "--secure-port=" + port},
		{"etcd", "etcd", "--data-dir=" + filepath.Join(e.h.Dir(), "etcd")},
		{"kube-controller-manager", "kube-controller-manager", "--kubeconfig=" + e.h.Kubeconfig()},
	} {
		if pid := findProcess(f.exe, f.arg); pid > 0 {
			ps = append(ps, procCPU{f.name, pid})
		} else if f.name != "kube-controller-manager" || e.kcm {
			t.Logf("e2e: cannot find the %s process; its CPU time is not reported", f.name)
		}
	}
	ps = append(ps, procCPU{"benchmark process", os.Getpid()})
	for _, p := range ps {
		if p.pid <= 0 {
			t.Fatalf("e2e: %s is not running", p.name)
		}
	}
	return ps
}

// findProcess returns the PID of a process whose executable's base name is
// exe and that has the argument arg, or 0.
func findProcess(exe, arg string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := cmdline(pid)
		if len(args) > 0 && filepath.Base(args[0]) == exe && slices.Contains(args[1:], arg) {
			return pid
		}
	}
	return 0
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// cmdlineFlag returns the value of --flag=value or --flag value in a
// process's command line, or "".
func cmdlineFlag(pid int, flag string) string {
	args := cmdline(pid)
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuTime is a process's user plus system CPU time (all its threads, not
// its children), or -1 when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name, field 2, may hold spaces and
// parentheses; the fields after its last ')' start with field 3.
func parseStatCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

func cpuSnapshot(ps []procCPU) map[string]time.Duration {
	m := make(map[string]time.Duration, len(ps))
	for _, p := range ps {
		m[p.name] = cpuTime(p.pid)
	}
	return m
}

func cpuDelta(before, after map[string]time.Duration) map[string]time.Duration {
	m := make(map[string]time.Duration, len(after))
	for k, a := range after {
		if b, ok := before[k]; ok && a >= 0 && b >= 0 {
			m[k] = a - b
		}
	}
	return m
}

// scrapeAll scrapes core, the function, the provider and kube-apiserver.
func (e *e2eEnv) scrapeAll(t *testing.T) (core, fn, prov, apisrv map[string]float64) {
	t.Helper()
	get := func(c *http.Client, u string) map[string]float64 {
		if u == "" {
			return map[string]float64{}
		}
		m, err := scrape(c, u)
		if err != nil {
			t.Logf("e2e: cannot scrape %s: %v", u, err)
		}
		return m
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	core = get(plain, e.h.CoreMetricsURL())
	if e.fnAddr != "" {
		fn = get(plain, "http://"+e.fnAddr+"/metrics")
	} else {
		fn = map[string]float64{}
	}
	prov = get(plain, e.p.ProviderMetricsURL)
	if hc, err := rest.HTTPClientFor(e.cfg); err == nil {
		hc.Timeout = 30 * time.Second
		apisrv = get(hc, strings.TrimSuffix(e.cfg.Host, "/")+"/metrics")
	} else {
		apisrv = map[string]float64{}
	}
	return core, fn, prov, apisrv
}

// scrape reads a Prometheus text endpoint into series -> value, a series
// being the line before its value: name{labels}.
func scrape(c *http.Client, u string) (map[string]float64, error) {
	ss, err := prom.Scrape(context.Background(), c, u)
	return ss.Series(), err
}

// metricName is the name of a series.
func metricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// label returns a label's value in a series, or "".
func label(series, name string) string {
	i := strings.Index(series, "{"+name+`="`)
	if i < 0 {
		i = strings.Index(series, ","+name+`="`)
	}
	if i < 0 {
		return ""
	}
	rest := series[i+len(name)+3:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// metricSum sums the series of a metric whose labels contain every match.
func metricSum(m map[string]float64, name string, match ...string) float64 {
	s := 0.0
	for k, v := range m {
		if metricName(k) != name {
			continue
		}
		ok := true
		for _, mt := range match {
			ok = ok && strings.Contains(k, mt)
		}
		if ok {
			s += v
		}
	}
	return s
}

// metricBy sums the series of a metric by the value of a label.
func metricBy(m map[string]float64, name, lbl string, match ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if metricName(k) != name {
			continue
		}
		ok := true
		for _, mt := range match {
			ok = ok && strings.Contains(k, mt)
		}
		if ok {
			out[label(k, lbl)] += v
		}
	}
	return out
}

type kv struct {
	k string
	v float64
}

// sortedKeysDesc returns m's non-zero entries, largest first.
func sortedKeysDesc(m map[string]float64) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		if v != 0 {
			out = append(out, kv{k, v})
		}
	}
	slices.SortFunc(out, func(a, b kv) int {
		switch {
		case a.v > b.v:
			return -1
		case a.v < b.v:
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	return out
}

func topN(s []kv, n int) []kv { return s[:min(n, len(s))] }

// widgetAPIRequests returns the Widget API server's requests by method and
// route, and their total.
func widgetAPIRequests(s *server.Server) (map[string]float64, float64) {
	by, total := map[string]float64{}, 0.0
	mfs, err := s.Registry().Gather()
	if err != nil {
		return by, total
	}
	for _, mf := range mfs {
		if mf.GetName() != "widgetapi_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			v := m.GetCounter().GetValue()
			k := l["route"]
			if !strings.HasPrefix(k, l["method"]+" ") {
				k = l["method"] + " " + k
			}
			by[k] += v
			total += v
		}
	}
	return by, total
}

// TestE2EParsers checks the /proc and Prometheus parsing the e2e section
// relies on (it runs without WIDGET_BENCH).
func TestE2EParsers(t *testing.T) {
	stat := "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 12 0"
	if got, want := parseStatCPU(stat), 3250*time.Millisecond; got != want {
		t.Errorf("parseStatCPU = %s, want %s", got, want)
	}
	if got := parseStatCPU("garbage"); got != -1 {
		t.Errorf("parseStatCPU(garbage) = %s, want -1", got)
	}
	if got := cpuTime(os.Getpid()); got < 0 {
		t.Errorf("cpuTime(self) = %s", got)
	}
	ss, _ := prom.Parse(strings.NewReader(`# HELP x y
function_run_function_request_total{function_name="function-widget",grpc_target="dns:///127.0.0.1:1"} 12
function_run_function_request_total{function_name="other"} 3
controller_runtime_reconcile_total{controller="a",result="success"} 5
controller_runtime_reconcile_total{controller="a",result="error"} 1
controller_runtime_reconcile_total{controller="b",result="success"} 2
process_cpu_seconds_total 1.5
`))
	m := ss.Series()
	if got := metricSum(m, "function_run_function_request_total"); got != 15 {
		t.Errorf("metricSum = %v, want 15", got)
	}
	if got := metricSum(m, "function_run_function_request_total", `function_name="function-widget"`); got != 12 {
		t.Errorf("metricSum with a match = %v, want 12", got)
	}
	if got := metricBy(m, "controller_runtime_reconcile_total", "controller"); got["a"] != 6 || got["b"] != 2 {
		t.Errorf("metricBy = %v, want a=6 b=2", got)
	}
	if got := metricSum(m, "process_cpu_seconds_total"); got != 1.5 {
		t.Errorf("metricSum without labels = %v, want 1.5", got)
	}
	if got := label(`x{verb="GET",resource="widgets",subresource=""}`, "resource"); got != "widgets" {
		t.Errorf("label = %q, want widgets", got)
	}
	if got := cmdlineFlag(os.Getpid(), "--no-such-flag"); got != "" {
		t.Errorf("cmdlineFlag = %q, want empty", got)
	}
}
