//go:build linux

package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func init() { register(20, "provider", providerSection) }

// providerSection: N Widgets to Ready for each reconcile rate, against raw
// API server creates; the steady state; an Observe-only import at scale.
func providerSection(t *testing.T, b *bench) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }

	n := envInt("WIDGET_BENCH_N", 1000)
	settle := time.Duration(envInt("WIDGET_BENCH_SETTLE_SECONDS", 0)) * time.Second
	runs := envInt("WIDGET_BENCH_PROVIDER_RUNS", 3) // of the defaults; other flag sets run once
	const workers = 8
	var extra []string
	if a := os.Getenv("WIDGET_BENCH_PROVIDER_ARGS"); a != "" {
		extra = strings.Fields(a)
	}
	sweep := []string{"", "--max-reconcile-rate=10", "--max-reconcile-rate=100"}
	if v, ok := os.LookupEnv("WIDGET_BENCH_SWEEP"); ok {
		sweep = strings.Split(v, ";")
	}
	k := b.kube(t)
	bin := b.build(t, "provider-widget", "./provider")
	// Secrets that are not the provider's, there for every run.
	foreign := envInt("WIDGET_BENCH_FOREIGN_SECRETS", 0)
	if foreign > 0 {
		createForeignSecrets(t, k, foreign, workers)
	}

	// WIDGET_BENCH_PROVIDER_BASELINE names another build of the provider
	// (e.g. of the main branch) to compare with: each run of the first flag
	// set then runs it too, right before, on the same API server.
	baseline := os.Getenv("WIDGET_BENCH_PROVIDER_BASELINE")

	type scenario struct {
		flags string
		runs  []providerRun
	}
	scs := make([]scenario, 0, len(sweep)+1)
	var base *scenario
	if baseline != "" {
		base = &scenario{flags: "baseline"}
	}
	seq := 0
	for i, flags := range sweep {
		sc := scenario{flags: flags}
		nruns := 1
		if i == 0 {
			nruns = runs
		}
		for range nruns {
			if base != nil && i == 0 {
				seq++
				r := runProvider(t, k, baseline, runOpts{ns: fmt.Sprintf("create-%d", seq), n: n, workers: workers, args: append(strings.Fields(flags), extra...), raw: true, settle: settle})
				t.Logf("baseline provider %q: all Ready in %s, raw ConfigMaps %s", flags, r.allReady, r.rawCreate)
				base.runs = append(base.runs, r)
			}
			seq++
			r := runProvider(t, k, bin, runOpts{ns: fmt.Sprintf("create-%d", seq), n: n, workers: workers, args: append(strings.Fields(flags), extra...), raw: true, settle: settle})
			t.Logf("provider %q: all Ready in %s, p50 %s, p99 %s, raw ConfigMaps %s", flags, r.allReady, quantile(r.toReady, .5), quantile(r.toReady, .99), r.rawCreate)
			sc.runs = append(sc.runs, r)
		}
		scs = append(scs, sc)
	}

	w("## provider-widget: %d Widgets to Ready\n\n", n)
	w("envtest (kube-apiserver v1.35.4 + etcd, from `hack/tools.sh`) with the provider's CRDs; the\n")
	w("provider binary as a subprocess with `--kubeconfig`, `--metrics-bind-address <free port> --health-probe-bind-address 0`\n")
	w("and the flags in the table (none: the defaults); the reference Widget API in the test process over\n")
	w("loopback HTTP with **zero provisioning delay and no rate limit**, one project, one namespaced ProviderConfig.\n")
	w("The provider is started and serving metrics first; then %d Widgets (size, region and one label set, as\n", n)
	w("function-widget composes them, so nothing is late-initialized) are created by %d concurrent clients, and a\n", workers)
	w("watch records when each is first Ready=True. Time-to-Ready is from the Widget's create request to that\n")
	w("watch event. In the same run and before the provider starts, the same %d clients create %d plain\n", workers, n)
	w("ConfigMaps: what the API server takes; then they write %d Widgets the way the provider must at the least, with no\n", n)
	w("provider running (create, a metadata update, two status updates each: *raw Widget lifecycles/s*).\n")
	w("*Reconciles* counts controller-runtime's reconciles, including the\n")
	w("ones the global rate limiter (`--max-reconcile-rate`) only deferred; *did work* counts the reconciles that\n")
	w("read the widget (one GET each). The first flag set runs %d times (with its median), the others once.\n", runs)
	w("RSS is the provider's VmRSS when all are Ready, and WIDGET_BENCH_SETTLE_SECONDS (%d) later with nothing\n", envInt("WIDGET_BENCH_SETTLE_SECONDS", 0))
	w("changing (0: not measured), in MiB (earlier sections of this document wrote MB for the same MiB figures);\n")
	w("*peak RSS* is the largest of the samples taken every 500 ms from the provider's start until all were Ready.\n\n")
	w("| flags | run | all Ready | per Widget p50 | p90 | p99 | Widgets Ready/s | raw ConfigMap creates/s | provider / raw | raw Widget lifecycles/s | provider / raw lifecycles | reconciles/Widget | did work/Widget | kube-apiserver requests/Widget | Widget API requests/Widget | feed: queued / skipped | provider CPU | RSS (MiB) | RSS after settling (MiB) | peak RSS (MiB) |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, sc := range scs {
		flags := sc.flags
		if flags == "" {
			flags = "(defaults)"
		}
		var rates, raws, lifes, alls []float64
		for i, r := range sc.runs {
			fn := float64(r.n)
			rate := fn / r.allReady.Seconds()
			raw := float64(r.rawCreateCount) / r.rawCreate.Seconds()
			life := fn / r.rawLifecycle.Seconds()
			rates, raws, lifes, alls = append(rates, rate), append(raws, raw), append(lifes, life), append(alls, r.allReady.Seconds())
			w("| `%s` | %d | %s | %s | %s | %s | %.1f | %.0f | %.2f%% | %.0f | %.1f%% | %.1f | %.2f | %.1f | %.1f | %.0f / %.0f | %.1f s | %.0f | %s | %.0f |\n", flags, i+1,
				secs(r.allReady), secs(quantile(r.toReady, .5)), secs(quantile(r.toReady, .9)), secs(quantile(r.toReady, .99)),
				rate, raw, 100*rate/raw, life, 100*rate/life, r.reconciles/fn, r.apiGets/fn, r.kubeRequests/fn, r.apiTotal/fn,
				r.feedEnqueues, r.feedSkips, r.cpu.Seconds(), float64(r.rssKB)/1024, settledRSS(r), float64(r.rssPeakKB)/1024)
		}
		if len(sc.runs) > 1 {
			w("| `%s` | median | %.2f s | | | | %.1f | %.0f | %.2f%% | %.0f | %.1f%% | | | | | | | | | |\n", flags, medianF(alls), medianF(rates), medianF(raws), 100*medianF(rates)/medianF(raws), medianF(lifes), 100*medianF(rates)/medianF(lifes))
		}
	}
	w("\n**Before and after** (measured on this machine on 2026-11-21, `--max-reconcile-rate=10`, N=100, one run each;\n")
	w("the provider log showed that at 10/s the token bucket is the only bottleneck, so time to all Ready is about\n")
	w("(reconciles - 100 burst) / 10):\n\n")
	w("| provider | all Ready | reconciles that did work | ProviderConfig reconciles | kube-apiserver requests/Widget |\n| --- | ---: | ---: | ---: | ---: |\n")
	w("| as of issue 6 | 36.8 s | 301 Widget | 167 (64 of them the ClusterProviderConfig controller failing to find a namespaced ProviderConfig) | 10.3 |\n")
	w("| + usage events filtered by ProviderConfig kind and debounced (1 s) | 22.4 s | 300 Widget | 13 | 10.3 |\n")
	w("| + feed echoes of the provider's own writes skipped, finalizer added with the default name, own create annotations ignored; bench Widgets set region (no late-init write) | 11.2 s | 200 Widget | 14 | 7.3 |\n\n")
	w("Session 1's published figure for the same flags (N=200, region late-initialized) was 83.0 s, 12.2 kube-apiserver\n")
	w("and 6.0 Widget API requests per Widget. The default `--max-reconcile-rate` is now 50 (the table's first row).\n")
	if base != nil {
		w("\nWith `WIDGET_BENCH_PROVIDER_BASELINE=%s`, the baseline ran right before each run of the first flag set, its ConfigMaps created the same way:\n\n", baseline)
		w("| build | run | all Ready | Widgets Ready/s | raw ConfigMap creates/s | provider / raw | kube-apiserver requests/Widget | writes (PUT, PATCH, POST: objects, status, events)/Widget | Widget API requests/Widget | provider CPU | RSS (MiB) | RSS after settling (MiB) | peak RSS (MiB) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, sc := range []scenario{*base, scs[0]} {
			name := "this build"
			if sc.flags == "baseline" {
				name = "baseline"
			}
			for i, r := range sc.runs {
				fn := float64(r.n)
				rate, raw := fn/r.allReady.Seconds(), float64(r.rawCreateCount)/r.rawCreate.Seconds()
				writes := r.kubeByMethod["PUT"] + r.kubeByMethod["PATCH"] + r.kubeByMethod["POST"]
				w("| %s | %d | %s | %.1f | %.0f | %.2f%% | %.2f | %.2f | %.2f | %.1f s | %.0f | %s | %.0f |\n", name, i+1, secs(r.allReady), rate, raw, 100*rate/raw,
					r.kubeRequests/fn, writes/fn, r.apiTotal/fn, r.cpu.Seconds(), float64(r.rssKB)/1024, settledRSS(r), float64(r.rssPeakKB)/1024)
			}
		}
	}
	last := scs[0].runs[len(scs[0].runs)-1]
	w("\nWidget API requests during creation (first flags, last run), by operation:\n\n| operation | requests | per Widget |\n| --- | ---: | ---: |\n")
	for _, op := range sortedKeys(last.apiRequests) {
		w("| %s | %.0f | %.2f |\n", op, last.apiRequests[op], last.apiRequests[op]/float64(last.n))
	}
	w("\nThe provider's kube-apiserver requests during creation (first flags, last run), by method and response code")
	w(" (`rest_client_requests_total`; PUT and PATCH are the writes, status ones included; 409 is a conflict):\n\n| method | code | requests | per Widget |\n| --- | --- | ---: | ---: |\n")
	for _, m := range sortedKeys(last.kubeByCall) {
		if last.kubeByCall[m] <= 0 {
			continue
		}
		method, code, _ := strings.Cut(m, " ")
		w("| %s | %s | %.0f | %.2f |\n", method, code, last.kubeByCall[m], last.kubeByCall[m]/float64(last.n))
	}
	w("\nIn the same run: %.0f reconciles put off because the cache had not yet seen the provider's own last write", last.cacheWaits["deferred"])
	w(" (`widget_stale_cache_waits_total`; %.0f gave up waiting after 5 s), %.0f status updates not sent because they changed nothing", last.cacheWaits["expired"], last.unchangedStatus)
	w(" (`widget_unchanged_status_updates_skipped_total`).\n")
	png := filepath.Join(b.docDir, "benchmarks-time-to-ready.png")
	series := make([]histSeries, 0, len(scs))
	for _, sc := range scs {
		label := sc.flags
		if label == "" {
			label = "defaults"
		}
		series = append(series, histSeries{label: label, ds: sc.runs[len(sc.runs)-1].toReady})
	}
	if err := writeHistograms(png, fmt.Sprintf("time-to-Ready of %d Widgets", n), series); err != nil {
		t.Fatal(err)
	}
	w("\n![time-to-Ready histograms](%s)\n\n", filepath.Base(png))
	w("Time-to-Ready of each flag set's last run, one panel per flag set (%s): x axis seconds from the\n", filepath.Base(png))
	w("Widget's create request, y axis Widgets per bar.\n\n")

	// Steady state: a short poll interval, several intervals long, scaled
	// to the default interval.
	sn := envInt("WIDGET_BENCH_STEADY_N", 200)
	poll := time.Duration(envInt("WIDGET_BENCH_STEADY_POLL_SECONDS", 20)) * time.Second
	window := 3 * poll
	seq++
	st := runProvider(t, k, bin, runOpts{ns: fmt.Sprintf("steady-%d", seq), n: sn, workers: workers, steady: window,
		args: append([]string{"--poll-interval=" + poll.String()}, extra...)})
	polls := window.Seconds() / poll.Seconds()
	perPoll := func(v float64) float64 { return v / polls / float64(sn) }
	const defaultPoll = 10 * time.Minute
	perHour := func(v float64) float64 { return perPoll(v) * float64(time.Hour) / float64(defaultPoll) }
	w("### Steady state\n\n")
	w("%d Widgets created and Ready as above with `--poll-interval=%s` (default jitter: a tenth of it either way), then\n", sn, poll)
	w("nothing changes for %s (%.0f poll intervals) while the provider runs. Per Widget and poll, and scaled to the\n", window, polls)
	w("default `--poll-interval=10m` (6 polls an hour):\n\n")
	w("| | in the window | per Widget per poll | per Widget per hour at 10m |\n| --- | ---: | ---: | ---: |\n")
	w("| reconciles | %.0f | %.2f | %.1f |\n", st.steadyRecs, perPoll(st.steadyRecs), perHour(st.steadyRecs))
	w("| kube-apiserver requests | %.0f | %.2f | %.1f |\n", st.steadyKube, perPoll(st.steadyKube), perHour(st.steadyKube))
	w("| Widget API requests (all) | %.0f | %.2f | %.1f |\n", st.steadyAPI, perPoll(st.steadyAPI), perHour(st.steadyAPI))
	w("| Widget API widget GETs | %.0f | %.2f | %.1f |\n", st.steadyGets, perPoll(st.steadyGets), perHour(st.steadyGets))
	w("\nThe window's kube-apiserver requests by method and code:")
	for _, m := range sortedKeys(st.steadyByCall) {
		if st.steadyByCall[m] > 0 {
			w(" %s %.0f;", m, st.steadyByCall[m])
		}
	}
	w("\n")
	w("\nThe change feed's long polls (one connection, `--feed-wait=30s`) are shared by all Widgets of a ProviderConfig,\n")
	w("so they are in the totals but do not grow with the number of Widgets.\n\n")

	// Scale: an Observe-only import of many existing widgets, with Secrets
	// in the cluster that are not the provider's.
	in := envInt("WIDGET_BENCH_IMPORT_N", 10000)
	seq++
	imp := runProvider(t, k, bin, runOpts{ns: fmt.Sprintf("import-%d", seq), n: in, workers: workers, importing: true,
		args: append([]string{"--max-reconcile-rate=100"}, extra...)})
	w("### Scale: %d Widgets\n\n", in)
	w("%d widgets created directly in the Widget API, then %d Observe-only Widgets importing them by external name\n", in, in)
	w("(`managementPolicies: [Observe]`), created by %d clients, `--max-reconcile-rate=100`. All Ready in %s\n", workers, secs(imp.allReady))
	w("(p50 %s, p99 %s); %.2f reconciles that did work and %.1f kube-apiserver requests per Widget; provider CPU %.1f s;\n",
		secs(quantile(imp.toReady, .5)), secs(quantile(imp.toReady, .99)), imp.apiGets/float64(in), imp.kubeRequests/float64(in), imp.cpu.Seconds())
	w("**provider RSS %.0f MiB with %d Widgets** (%.0f MiB with %d above)", float64(imp.rssKB)/1024, in, float64(last.rssKB)/1024, last.n)
	if foreign > 0 {
		w(", with %d Secrets of 1 KiB in the cluster that are not the provider's", foreign)
	}
	w(".\n")

	return doc.String()
}

// runOpts says what one provider run does.
type runOpts struct {
	ns      string // namespace, unique per run
	n       int    // Widgets
	workers int    // concurrent clients creating them
	args    []string
	// steady, when set, keeps the provider running this long after all
	// are Ready and counts what it does meanwhile.
	steady time.Duration
	// importing creates the widgets in the Widget API first and the
	// Widgets as Observe-only imports of them (external names set).
	importing bool
	// raw also measures raw ConfigMap creates of n objects first.
	raw bool
	// settle, when set, measures RSS again this long after all are
	// Ready, with nothing changing.
	settle time.Duration
	// steadyDrift, when set, changes one random widget out of band (as
	// someone resizing it by hand) this often during the steady window,
	// so that the change feed carries drift.
	steadyDrift time.Duration
}

// providerRun is the outcome of one provider run.
type providerRun struct {
	runOpts
	createFor    time.Duration   // sending all creates
	allReady     time.Duration   // first create sent to last Widget Ready
	toReady      []time.Duration // per Widget, create sent to Ready
	reconciles   float64
	kubeRequests float64 // from the provider, rest_client_requests_total
	kubeByMethod map[string]float64
	// kubeByCall: the same by "METHOD code" (a 409 is a conflict).
	kubeByCall map[string]float64
	// cacheWaits are widget_stale_cache_waits_total by outcome;
	// unchangedStatus is widget_unchanged_status_updates_skipped_total.
	cacheWaits      map[string]float64
	unchangedStatus float64
	apiRequests     map[string]float64
	apiTotal        float64
	apiGets         float64 // GETs of one widget: one per reconcile that did work
	feedEnqueues    float64
	feedSkips       float64
	cpu             time.Duration // provider CPU time, start to all Ready
	steadyKube      float64
	steadyAPI       float64
	steadyGets      float64
	steadyRecs      float64
	// steadyByCall: kube-apiserver requests in the steady window by
	// "METHOD code".
	steadyByCall map[string]float64
	// steadyOps: the provider's Widget API requests in the steady window
	// by operation (its client's names: "get widget", "list changes");
	// steadyCPU the provider's CPU time in it; steadyChanges the
	// out-of-band changes sent (o.steadyDrift) and steadyRepairs the
	// provider's drift repairs (widget_updates_total{cause="drift"}).
	steadyOps      map[string]float64
	steadyCPU      time.Duration
	steadyChanges  int
	steadyRepairs  float64
	rssKB          int // when all were Ready (and at the end of the steady window, if larger)
	rssSettledKB   int // o.settle after all were Ready; 0: not measured
	rssPeakKB      int // the largest of the samples taken every 500 ms from the provider's start to all Ready
	rawCreate      time.Duration
	rawCreateCount int
	// rawLifecycle: the same clients writing n Widgets the way the
	// provider must at the least (see rawWidgetLifecycle).
	rawLifecycle time.Duration
}

// runProvider starts a Widget API server and the provider, creates o.n
// Widgets and waits for all to be Ready.
func runProvider(t *testing.T, k *kubeEnv, bin string, o runOpts) providerRun {
	t.Helper()
	r := providerRun{runOpts: o, apiRequests: map[string]float64{}}
	n, ns := o.n, o.ns
	if o.raw {
		r.rawCreate, r.rawCreateCount = rawCreate(t, k, "raw-"+ns, n, o.workers), n
		r.rawLifecycle = rawWidgetLifecycle(t, k, "rawwidget-"+ns, n, o.workers)
	}

	s, err := server.New(server.Options{DataDir: t.TempDir(), Tokens: map[string]string{"bench-token": "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer func() { s.Shutdown(); hs.Close(); _ = s.Close() }()
	if o.importing {
		importWidgets(t, hs.URL, n, o.workers)
	}
	api0, _ := apiRequests(t, s)

	ctx := context.Background()
	setupWidgetProject(t, k, ns, hs.URL, "bench-token")
	p := startProviderProcess(t, k, bin, ns, o.args)
	r.args = p.args
	metrics, stop, pid := p.metrics, p.stop, p.pid
	kube0 := promSum(metrics, "rest_client_requests_total")
	kubeBy0 := promSamples(metrics, "rest_client_requests_total").By("method")
	kubeCalls0 := byMethodAndCode(promSamples(metrics, "rest_client_requests_total"))
	cpu0 := cpuTime(pid)
	peakRSS := samplePeakRSS(pid, 500*time.Millisecond)

	readyAt := make(map[string]time.Time, n)
	var mu sync.Mutex
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	allReady := make(chan struct{})
	go watchReady(watchCtx, t, k.kube, ns, n, readyAt, &mu, allReady)

	var sent map[string]time.Time
	sent, r.createFor = createAll(t, k.kube, n, o.workers, func(i int) client.Object {
		w := benchWidget(ns, fmt.Sprintf("w-%05d", i))
		if o.importing {
			w.Spec.ForProvider = commonv1beta1.WidgetParameters{}
			w.Spec.InitProvider = commonv1beta1.WidgetInitParameters{}
			w.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
			meta.SetExternalName(w, importName(i))
		}
		return w
	})
	select {
	case <-allReady:
	case <-time.After(time.Duration(n)*200*time.Millisecond + 2*time.Minute):
		mu.Lock()
		got := len(readyAt)
		mu.Unlock()
		t.Fatalf("only %d of %d Widgets Ready; provider log in %s", got, n, p.log)
	}
	first, last := time.Time{}, time.Time{}
	mu.Lock()
	for name, at := range sent {
		ra := readyAt[name]
		r.toReady = append(r.toReady, ra.Sub(at))
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if ra.After(last) {
			last = ra
		}
	}
	mu.Unlock()
	r.allReady = last.Sub(first)
	r.rssPeakKB = peakRSS()
	saveHeapProfile(t, p, ns)
	r.cpu = cpuTime(pid) - cpu0
	r.reconciles = promSum(metrics, "controller_runtime_reconcile_total")
	r.kubeRequests = promSum(metrics, "rest_client_requests_total") - kube0
	r.kubeByMethod = promSamples(metrics, "rest_client_requests_total").By("method")
	for m, v := range kubeBy0 {
		r.kubeByMethod[m] -= v
	}
	r.kubeByCall = byMethodAndCode(promSamples(metrics, "rest_client_requests_total"))
	r.cacheWaits = promSamples(metrics, "widget_stale_cache_waits_total").By("outcome")
	r.unchangedStatus = promSum(metrics, "widget_unchanged_status_updates_skipped_total")
	for m, v := range kubeCalls0 {
		r.kubeByCall[m] -= v
	}
	r.feedEnqueues = promSum(metrics, "widget_feed_enqueues_total")
	r.feedSkips = promSum(metrics, "widget_feed_skips_total")
	apiBy, apiTot := apiRequests(t, s)
	for op, v := range apiBy {
		if d := v - api0[op]; d > 0 {
			r.apiRequests[op] = d
		}
	}
	r.apiTotal = apiTot - sum(api0)
	r.apiGets = r.apiRequests["GET /v1/widgets/{name}"]
	r.rssKB = rssOf(pid)
	if o.settle > 0 {
		time.Sleep(o.settle)
		r.rssSettledKB = rssOf(pid)
	}

	if o.steady > 0 {
		// Everything counted from the window's start: the settle before
		// it is not steady state.
		before := byMethodAndCode(promSamples(metrics, "rest_client_requests_total"))
		snap0, steadyCPU0 := snapProvider(metrics), cpuTime(pid)
		srv0, srvTotal0 := apiRequests(t, s)
		if o.steadyDrift > 0 {
			r.steadyChanges = driftSteadily(t, k, ns, hs.URL, o.steadyDrift, o.steady)
		} else {
			time.Sleep(o.steady)
		}
		r.steadyCPU = cpuTime(pid) - steadyCPU0
		d := snapProvider(metrics).minus(snap0)
		r.steadyRepairs, r.steadyOps, r.steadyRecs, r.steadyKube = d.drift, d.ops, d.reconciles, d.kube
		r.steadyByCall = byMethodAndCode(promSamples(metrics, "rest_client_requests_total"))
		for m, v := range before {
			r.steadyByCall[m] -= v
		}
		srv, srvTotal := apiRequests(t, s)
		r.steadyAPI = srvTotal - srvTotal0
		r.steadyGets = srv["GET /v1/widgets/{name}"] - srv0["GET /v1/widgets/{name}"]
		if rss := rssOf(pid); rss > r.rssKB {
			r.rssKB = rss
		}
		// After the RSS: the profile's forced GC would lower it.
		saveHeapProfile(t, p, ns+"-window-end")
	}
	stop()
	cleanup(t, k, ns, o.workers)
	return r
}

// rawCreate measures how fast the API server creates n plain ConfigMaps.
func rawCreate(t *testing.T, k *kubeEnv, ns string, n, workers int) time.Duration {
	t.Helper()
	if err := k.kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	_, d := createAll(t, k.kube, n, workers, func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%05d", i)}, Data: map[string]string{"size": "medium", "team": "a"}}
	})
	return d
}

// rawWidgetLifecycle measures how fast the API server takes the writes a
// new Widget needs at the least, with no provider running: the create, an
// update of its metadata (the provider's finalizer and external name), and
// two status updates (Creating after the widget's create, then Ready); four
// writes of a Widget, one after the other, for each of n Widgets, by the
// same clients as rawCreate. The Widgets are deleted before the provider
// starts, so it never sees them.
func rawWidgetLifecycle(t *testing.T, k *kubeEnv, ns string, n, workers int) time.Duration {
	t.Helper()
	ctx := context.Background()
	if err := k.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	parallel(n, workers, func(i int) {
		w := benchWidget(ns, fmt.Sprintf("w-%05d", i))
		err := k.kube.Create(ctx, w)
		if err == nil {
			meta.AddFinalizer(w, "bench.widgetco.io/raw")
			meta.SetExternalName(w, w.GetName())
			err = k.kube.Update(ctx, w)
		}
		if err == nil {
			w.SetConditions(xpv2.Creating(), xpv2.ReconcileSuccess())
			err = k.kube.Status().Update(ctx, w)
		}
		if err == nil {
			w.SetConditions(xpv2.Available())
			err = k.kube.Status().Update(ctx, w)
		}
		if err != nil {
			t.Errorf("raw Widget %d: %v", i, err)
		}
	})
	d := time.Since(start)
	l := &nsv1beta1.WidgetList{}
	if err := k.kube.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		w := &l.Items[i]
		w.SetFinalizers(nil)
		if err := k.kube.Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := k.kube.Delete(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// benchWidget is a Widget as function-widget composes it: every field set,
// so nothing is late-initialized.
func benchWidget(ns, name string) *nsv1beta1.Widget {
	w := &nsv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: nsv1beta1.WidgetSpec{
			ForProvider:  commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}},
			InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")},
		},
	}
	w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	return w
}

// importName is the name of the i-th pre-existing widget of an import run.
func importName(i int) string { return fmt.Sprintf("existing-%05d", i) }

// importWidgets creates n widgets directly in the Widget API, as if they
// existed before Crossplane.
func importWidgets(t *testing.T, url string, n, workers int) {
	t.Helper()
	c, err := widgetapi.New(url, widgetapi.WithToken("bench-token"))
	if err != nil {
		t.Fatal(err)
	}
	parallel(n, workers, func(i int) {
		if _, err := c.CreateWidget(context.Background(), widgetapi.CreateWidgetRequest{Name: importName(i), Size: "medium", Region: "us-east-1"}); err != nil {
			t.Errorf("cannot create widget %s: %v", importName(i), err)
		}
	})
}

// createForeignSecrets creates n Secrets of 1 KiB in namespace foreign, as
// other workloads (other providers' connection Secrets, Helm releases) fill
// a real cluster.
func createForeignSecrets(t *testing.T, k *kubeEnv, n, workers int) {
	t.Helper()
	if err := k.kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}}); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 1024)
	_, took := createAll(t, k.kube, n, workers, func(i int) client.Object {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "foreign", Name: fmt.Sprintf("s-%05d", i)},
			Type:       "connection.crossplane.io/v1alpha1",
			Data:       map[string][]byte{"key": data},
		}
	})
	t.Logf("created %d foreign Secrets in %s", n, took)
}

// byMethodAndCode adds up samples of rest_client_requests_total by
// "METHOD code".
func byMethodAndCode(ss prom.Samples) map[string]float64 {
	m := map[string]float64{}
	for _, x := range ss {
		m[x.Labels["method"]+" "+x.Labels["code"]] += x.Value
	}
	return m
}

// settledRSS is r's settled RSS in MiB, or "-" when not measured.
func settledRSS(r providerRun) string {
	if r.rssSettledKB <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(r.rssSettledKB)/1024)
}
