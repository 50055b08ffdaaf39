//go:build linux

package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// e2eMarkdown writes the section: the conditions, a row per run, and the
// details of the last run.
func e2eMarkdown(t *testing.T, b *bench, e *e2eEnv, rs []*e2eRun) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	r := rs[len(rs)-1]

	w("## End to end: %s to Ready on a real one-node cluster\n\n", r.counts())
	w("`WIDGET_BENCH_ONLY=e2e`; N from `WIDGET_BENCH_E2E_N` (default 100), runs from `WIDGET_BENCH_E2E_RUNS` (default 1)")
	if r.mixed() {
		w(",\nkinds from `WIDGET_BENCH_E2E_MIX` (`half`: claims and namespaced XWidgets in turn, half of N each)")
	}
	w(".\n")
	w("The real one-node cluster of `make demo` and the e2e suite (test/lib/cluster, set up by test/lib/platform as\n")
	w("the suite does), started afresh for each run: etcd, kube-apiserver, kube-controller-manager and\n")
	w("kube-scheduler v1.35.4, kubelet on containerd and runc, kube-proxy and CoreDNS; Crossplane core v2.4.2\n")
	w("installed from its Helm chart with the chart's defaults (a 500m CPU and 1Gi memory limit on core)%s,\n", flagsNote("WIDGET_BENCH_E2E_CORE_ARGS", "and"))
	w("and provider-widget and function-widget installed through Crossplane's package manager from\n")
	w("%s and run by kubelet with examples/runtime's DeploymentRuntimeConfigs: the working tree's images,\n", pkgNames(e.pkgs))
	w("default flags apart from metrics and health addresses (no `--debug`)%s. The XWidget APIs and ProviderConfigs\n", flagsNote("WIDGET_BENCH_E2E_PROVIDER_ARGS", ", the provider"))
	w("come from examples/ (%s). The reference Widget API runs in the\n", r.compositions(e.root))
	w("benchmark's process with **zero provisioning delay and no rate limit**, so what is measured is the control\n")
	w("plane, not the cloud.\n\n")
	if r.mixed() {
		r.writeMixedRun(w)
	} else {
		w("Each run: one warm-up claim goes to Ready first (cold, which includes core starting its watches of the\n")
		w("composed kinds and dialling the function). Then %d `WidgetClaim`s, `examples/composition/legacy/claim.yaml`\n", r.n)
		w("renamed (small widget in eu-west-1, one access key, its own connection Secret), are created in one namespace\n")
		w("by %d concurrent clients; watches record when each claim is first Synced=True and Ready=True, and when its XR\n", e2eWorkers)
		w("and its composed Widget and WidgetKey appear and become Ready. Time-to-Ready is from the claim's create\n")
		w("request to that watch event.")
	}
	w(" CPU time is utime+stime from `/proc/<pid>/stat` of each process, from just before\n")
	w("the first create to the moment the last %s is Ready. Then %s of steady state with all %s Ready.\n\n", r.unit(), secs(r.steady), r.many())

	w("| run | warm-up claim | %[1]s Ready | all Ready | %[1]s Ready/s | time-to-Ready p50 | p90 | p99 | max | CPU/%[2]s: core | function | provider | kube-apiserver | all | RunFunction calls/%[2]s | steady state: RunFunction calls/min | kube-apiserver CPU |\n", r.many(), r.unit())
	w("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	cols := []func(r *e2eRun) float64{
		func(r *e2eRun) float64 { return r.kinds[0].warmup.Seconds() },
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
	if r.mixed() {
		writeKindsTable(w, rs)
	}
	w("### Run %d in detail\n\n", len(rs))
	warm := make([]string, 0, len(r.kinds))
	for i, k := range r.kinds {
		if i == 0 {
			warm = append(warm, fmt.Sprintf("Warm-up %s Ready in %s", k.kind.noun, secs(k.warmup)))
		} else {
			warm = append(warm, fmt.Sprintf("warm-up %s in %s", k.kind.noun, secs(k.warmup)))
		}
	}
	w("%s; %d %s created in %s.\n\n", strings.Join(warm, ", "), r.n, r.many(), secs(r.createFor))
	w("%s", r.details(t, b, e))
	return doc.String()
}

// details writes a run's details.
func (r *e2eRun) details(t *testing.T, b *bench, e *e2eEnv) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	for _, k := range r.kinds {
		if r.timedOut && (k.ready < k.n || !r.mixed()) {
			k.writeNotReady(w, r.allReady)
		}
	}
	for i, k := range r.kinds {
		var relists []string
		if i == len(r.kinds)-1 {
			relists = r.relists
		}
		k.writeStages(w, relists)
	}
	r.writeCPU(w)
	r.writeWork(w, e)
	r.writeWrites(w)
	if r.mixed() {
		r.writeKindWork(w)
	}
	if len(r.toReady) > 0 {
		r.writePlot(t, b, w)
	}
	w("Setting up (build, start, install, publish) took %s; the cluster's logs are in `%s/logs` until the next run.\n", secs(e.setup), e2eDir)
	return doc.String()
}

// writeNotReady writes how the objects of k's kind that never got Ready
// ended, after waiting for wait.
func (k *kindRun) writeNotReady(w func(string, ...any), wait time.Duration) {
	w("**Not all %s got Ready: %d of %d after %s.** How the others ended (last stage seen; %s status):\n\n", k.kind.many, k.ready, k.n, secs(wait), k.kind.noun)
	ks := make([]string, 0, len(k.notReady))
	for s := range k.notReady {
		ks = append(ks, s)
	}
	slices.SortFunc(ks, func(a, b string) int { return k.notReady[b] - k.notReady[a] })
	for _, s := range ks {
		w("- %d: %s\n", k.notReady[s], strings.Replace(s, ";", ":", 1))
	}
	w("\n")
}

// writeStages writes where the time went for k's kind: each stage's times
// since the create request and since the stage before, and what the
// watches saw go wrong (and the watches that had to re-list).
func (k *kindRun) writeStages(w func(string, ...any), relists []string) {
	w("Where the time goes, over the %d %s that got Ready: from %s's create request to each stage, and from\n", k.ready, k.kind.many, k.kind.one)
	w("the stage before it (WidgetKey Ready: from WidgetKey created). ")
	if k.kind.keys > 1 {
		w("%s reaches a WidgetKey stage when all its %d WidgetKeys have.\n", strings.ToUpper(k.kind.one[:1])+k.kind.one[1:], k.kind.keys)
	}
	w("Stages are recorded until the end of the\n")
	w("steady-state window, so a stage that comes after the %s's Ready shows here too.\n\n", k.kind.noun)
	w("| stage | %s | since create p50 | p90 | max | since the stage before p50 | p90 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", k.kind.many)
	for _, s := range k.kind.stages {
		ds, gs := k.stages[s], k.gaps[s]
		w("| %s | %d | %s | %s | %s | %s | %s |\n", s, len(ds), secs(quantile(ds, .5)), secs(quantile(ds, .9)), secs(quantile(ds, 1)),
			secs(quantile(gs, .5)), secs(quantile(gs, .9)))
	}
	if k.slowest != "" {
		w("\nThe slowest %s, %s.\n", k.kind.noun, k.slowest)
	}
	if k.inverted > 0 {
		w("\n**The XR Ready row is late:** for %d claims the benchmark's watch saw the XR Ready only after the claim,\n", k.inverted)
		w("yet core sets a claim Ready only once it reads its XR Ready: the watch saw it late, or missed the version\n")
		w("(a watch that falls behind is closed by the kube-apiserver, and the re-list shows only current versions).")
	}
	if len(k.xrLag) > 0 {
		if k.inverted == 0 {
			w("\n")
		}
		w(" The benchmark's watch saw XRs Ready %s (p50) and up to %s after their Ready condition's\n", secs(quantile(k.xrLag, .5)), secs(quantile(k.xrLag, 1)))
		w("lastTransitionTime, over the %d XRs that never lost Ready (lower bounds: lastTransitionTime has a second's\n", len(k.xrLag))
		w("resolution, so a second is taken off).\n")
	} else if k.inverted > 0 {
		w("\n")
	}
	var lost []string
	for _, s := range k.kind.lost {
		if k.flaps[s] > 0 {
			lost = append(lost, fmt.Sprintf("%s lost %d times (%d %s)", s, k.flaps[s], k.flapped[s], k.kind.many))
		}
	}
	if len(lost) > 0 {
		w("\nReady, once reached, was lost again (a later version without it): %s. ", strings.Join(lost, ", "))
	} else {
		w("\nNo object lost Ready once it had reached it. ")
	}
	w("At the end of the steady-state window %d of %d %s were Ready.", k.readyEnd, k.n, k.kind.many)
	if len(relists) > 0 {
		slices.Sort(relists)
		w(" The benchmark's watches had to re-list: %s.", strings.Join(relists, "; "))
	}
	w("\n\n")
}

// writeCPU writes each process's CPU time in the run, idle and at steady
// state.
func (r *e2eRun) writeCPU(w func(string, ...any)) {
	w("CPU time per process: during the run, per %s, and the same process's rate when idle (%s before the\n", r.unit(), secs(r.idle))
	w("%s, with only %s) and at steady state (%s after the last %s was Ready, %d %s Ready).\n",
		r.many(), r.warmups(), secs(r.steady), r.unit(), r.ready+len(r.kinds), r.many())
	w("Wall time of the run: %s.\n\n", secs(r.allReady))
	w("| process | CPU during the run | CPU per %s | share | idle CPU | steady-state CPU | RSS at the end |\n", r.unit())
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
}

// writeWork writes the work per object during the run, from the counters
// of core, the function, the provider, the Widget API and kube-apiserver,
// and the work at steady state.
func (r *e2eRun) writeWork(w func(string, ...any), e *e2eEnv) {
	perClaim := func(v float64) float64 { return v / float64(r.n) }
	w("Work per %s during the run (counter deltas over %d %s):\n\n", r.unit(), r.n, r.many())
	w("| what | per %s | source |\n| --- | ---: | --- |\n", r.unit())
	rf := r.core.sum("function_run_function_request_total")
	w("| RunFunction calls (core) | %.1f | core `function_run_function_request_total` |\n", perClaim(rf))
	if h := r.fn.sum("grpc_server_handled_total", `grpc_method="RunFunction"`); h > 0 || e.fnURL != "" {
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
		w("At steady state (%s, %d %s Ready): %.0f RunFunction calls, %.0f core reconciles, %.0f Widget API requests",
			secs(r.steady), r.ready+len(r.kinds), r.many(), r.coreSty.sum("function_run_function_request_total"),
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
}

// writePlot draws the histogram of the objects' time-to-Ready next to the
// document and writes its link and caption.
func (r *e2eRun) writePlot(t *testing.T, b *bench, w func(string, ...any)) {
	png := filepath.Join(b.docDir, "benchmarks-e2e-time-to-ready.png")
	if err := writeHistogram(png, r.toReady); err != nil {
		t.Errorf("cannot write %s: %v", png, err)
	} else {
		w("![Time-to-Ready of %d %s](%s)\n\n", r.ready, r.many(), filepath.Base(png))
		w("Time-to-Ready of the %d %s: %s; x axis 0 to %s (the slowest), one bar per 1/40 of it; y axis: %s\n", r.ready, r.many(), filepath.Base(png), secs(quantile(r.toReady, 1)), r.many())
		w("per bar, scaled to the tallest. Grid lines every 1/4 of each axis.\n\n")
	}
}

// cpuPerClaimMS is a process's CPU time in the run per object in ms, or all
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

// cpuNote says what the CPU figures are worth.
func cpuNote(r *e2eRun) string {
	var idle time.Duration
	for _, d := range r.cpuIdl {
		idle += d
	}
	bg := time.Duration(float64(idle) / r.idle.Seconds() * r.allReady.Seconds())
	return fmt.Sprintf("At the idle rate the processes together would have used %.2f s in the run's %s anyway; the per-%s figures include it.", bg.Seconds(), secs(r.allReady), r.unit())
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
	return "`_output/xpkg/" + filepath.Base(p.Provider) + "` and `" + filepath.Base(p.Function) + "`"
}

// compositionTTL describes the TTLs of the function input of the
// Composition in examples/composition/<dir>, e.g. ", TTLs converging 1m,
// ready 10m".
func compositionTTL(root, dir string) string {
	objs, err := platform.ReadObjects(filepath.Join(root, "examples", "composition", dir, "composition.yaml"))
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--help").Output()
	if m := regexp.MustCompile(`--max-reconcile-rate=(\S+)`).FindSubmatch(out); m != nil {
		return string(m[1]) + " (the default)"
	}
	return "its default"
}

// flagsNote describes the extra flags a knob added.
func flagsNote(name, what string) string {
	if a := os.Getenv(name); strings.TrimSpace(a) != "" {
		return fmt.Sprintf(" %s with `%s` (`%s`)", what, strings.TrimSpace(a), name)
	}
	return ""
}

// writeWrites writes what the writes to managed resources, XRs and claims
// did, by client: how many changed their object and how many changed
// nothing (WIDGET_AUDIT_BODIES=1 runs only).
func (r *e2eRun) writeWrites(w func(string, ...any)) {
	if len(r.writes) == 0 {
		return
	}
	per := func(v int) float64 { return float64(v) / float64(r.n) }
	w("Writes to managed resources, XRs and claims per %s, from kube-apiserver's audit log with request and response bodies\n", r.unit())
	w("(`WIDGET_AUDIT_BODIES=1`): a write changed its object when the object's resourceVersion after it differs from the one after the\n")
	w("object's previous write; refused are 4xx/5xx answers (409 conflicts, mostly). The whole run, steady window included.\n\n")
	w("| client | resource | verb | changed | changed nothing | refused |\n| --- | --- | --- | ---: | ---: | ---: |\n")
	for _, x := range r.writes {
		res := x.Resource
		if x.Subresource != "" {
			res += "/" + x.Subresource
		}
		w("| %s | %s | %s | %.2f | %.2f | %.2f |\n", shortUser(x.User), res, x.Verb, per(x.Changed), per(x.Unchanged), per(x.Failed))
	}
	w("\n")
}

// shortUser names a ServiceAccount by its name, with a package revision's
// hash left out.
func shortUser(u string) string {
	u = u[strings.LastIndex(u, ":")+1:]
	for _, p := range []string{"provider-widget", "function-widget"} {
		if strings.Contains(u, p) {
			return p
		}
	}
	return u
}
