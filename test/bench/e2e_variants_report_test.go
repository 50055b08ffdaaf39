//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The e2e section's report of its variants side by side: a table of medians,
// the losses of Ready over time, and a plot of time-to-Ready.

// A variantRow is a row of the side-by-side table: its value for one run
// of a variant, the median over runs in the table.
type variantRow struct {
	what, format string
	v            func(r *e2eRun, k *kindRun, vr *variantRuns) float64
}

// variantRows are the side-by-side table's rows. Per claim means over the
// run's N claims; the run is from the first create to all Ready, the
// steady window the WIDGET_BENCH_E2E_STEADY_SECONDS after it.
var variantRows = []variantRow{
	{"claims Ready", "%.0f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 { return float64(r.ready) }},
	{"time to all Ready", "%.2f s", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 { return r.allReady.Seconds() }},
	{"time-to-Ready p50", "%.2f s", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 { return quantile(r.toReady, .5).Seconds() }},
	{"time-to-Ready max", "%.2f s", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 { return quantile(r.toReady, 1).Seconds() }},
	{"WidgetKey Ready p50, from the claim's create", "%.2f s", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return quantile(k.stages[stKeyReady], .5).Seconds()
	}},
	{"XR Ready p50, from its WidgetKey Ready", "%.2f s", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return quantile(k.gaps[stXRReady], .5).Seconds()
	}},
	{"claim Ready p50, from its XR Ready", "%.2f s", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return quantile(k.gaps[stReady], .5).Seconds()
	}},
	{"claim Ready lost, times", "%.0f", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 { return float64(k.flaps[stReady]) }},
	{"&nbsp; claims that lost it", "%.0f", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 { return float64(k.flapped[stReady]) }},
	{"XR Ready lost, times", "%.0f", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 { return float64(k.flaps[stXRReady]) }},
	{"&nbsp; XRs that lost it", "%.0f", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 { return float64(k.flapped[stXRReady]) }},
	{"Ready lost (claim or XR) after all were Ready", "%.0f", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 { return float64(k.lostAfter) }},
	{"claims Ready at the end of the steady window", "%.0f", func(_ *e2eRun, k *kindRun, _ *variantRuns) float64 { return float64(k.readyEnd) }},
	{"RunFunction calls per claim (all steps)", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return runFunctionCalls(r.core, "") / float64(r.n)
	}},
	{"&nbsp; to the first step (function-widget; P&T)", "%.1f", func(r *e2eRun, _ *kindRun, vr *variantRuns) float64 {
		return runFunctionCalls(r.core, vr.v.firstStep) / float64(r.n)
	}},
	{"&nbsp; v1 requests refused as Unimplemented, then sent as v1beta1", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.core.sum("function_run_function_response_total", `grpc_code="Unimplemented"`) / float64(r.n)
	}},
	{"XR watch events per claim (core's circuit breaker)", "%.1f", func(r *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return k.kind.xrEvents(r.core, "") / float64(r.n)
	}},
	{"&nbsp; dropped by the open breaker", "%.1f", func(r *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return k.kind.xrEvents(r.core, "Dropped") / float64(r.n)
	}},
	{"&nbsp; breaker openings", "%.0f", func(r *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return k.kind.breakerOpens(r.core)
	}},
	{"core reconciles per claim (claim and XR controllers)", "%.1f", func(r *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return k.kind.coreReconciles(r.core) / float64(r.n)
	}},
	{"&nbsp; of the claim controller", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.core.sum("controller_runtime_reconcile_total", `controller="claim/`) / float64(r.n)
	}},
	{"kube-apiserver requests per claim, all clients", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.apisrv.sum("apiserver_request_total") / float64(r.n)
	}},
	{"&nbsp; core's", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.core.sum("rest_client_requests_total") / float64(r.n)
	}},
	{"&nbsp; provider-widget's", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.prov.sum("rest_client_requests_total") / float64(r.n)
	}},
	{"&nbsp; answered 409 (a write from a stale read), all clients", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.apisrv.sum("apiserver_request_total", `code="409"`) / float64(r.n)
	}},
	{"&nbsp; claim writes (PUT of the claim and of its status)", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.apisrv.sum("apiserver_request_total", `resource="widgetclaims"`, `verb="PUT"`) / float64(r.n)
	}},
	{"&nbsp; XR applies and updates", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return (r.apisrv.sum("apiserver_request_total", `resource="xwidgets"`, `verb="APPLY"`) +
			r.apisrv.sum("apiserver_request_total", `resource="xwidgets"`, `verb="PUT"`)) / float64(r.n)
	}},
	{"&nbsp; Secret reads (GET)", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.apisrv.sum("apiserver_request_total", `resource="secrets"`, `verb="GET"`) / float64(r.n)
	}},
	{"&nbsp; Event writes (POST, PATCH), all clients", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return (r.apisrv.sum("apiserver_request_total", `resource="events"`, `verb="POST"`) +
			r.apisrv.sum("apiserver_request_total", `resource="events"`, `verb="PATCH"`)) / float64(r.n)
	}},
	{"RunFunction calls function-widget handled per claim", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.fn.sum("grpc_server_handled_total", `grpc_method="RunFunction"`) / float64(r.n)
	}},
	{"CPU per claim, all processes", "%.0f ms", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 { return r.cpuPerClaimMS("") }},
	{"steady window: RunFunction calls/min (all steps)", "%.0f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return runFunctionCalls(r.coreSty, "") / max(r.steady.Minutes(), 1e-9)
	}},
	{"steady window: core reconciles/min", "%.0f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.coreSty.sum("controller_runtime_reconcile_total") / max(r.steady.Minutes(), 1e-9)
	}},
	{"steady window: kube-apiserver requests/min per claim", "%.1f", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return r.apisrvSty.sum("apiserver_request_total") / max(r.steady.Minutes(), 1e-9) / float64(r.n)
	}},
	{"steady window: kube-apiserver CPU", "%.0f%%", func(r *e2eRun, _ *kindRun, _ *variantRuns) float64 {
		return 100 * r.cpuSty[procAPIServer].Seconds() / max(r.steady.Seconds(), 1e-9)
	}},
}

// runFunctionCalls is the RunFunction calls core made, to function fn or
// to all when fn is "", from core's counters in d. A call to a function
// built on function-sdk-go before v0.3 (function-patch-and-transform
// v0.5.0) is two requests: core sends v1, which the function does not
// serve, then the same request as v1beta1 (core's internal/xfn
// BetaFallBackFunctionRunnerServiceClient). Those refusals are not calls; they are counted
// apart.
func runFunctionCalls(d metricDelta, fn string) float64 {
	var match []string
	if fn != "" {
		match = []string{`function_name="` + fn + `"`}
	}
	return d.sum("function_run_function_response_total", match...) -
		d.sum("function_run_function_response_total", append(match, `grpc_code="Unimplemented"`)...)
}

// claimRun is the claims' kind of run r.
func claimRun(r *e2eRun) *kindRun {
	for _, k := range r.kinds {
		if k.kind.gvk == gvkClaim {
			return k
		}
	}
	return r.kinds[0]
}

// compositionSelection says how the run's claims chose their Composition
// (selectComposition).
func compositionSelection() string {
	if os.Getenv("WIDGET_BENCH_E2E_NAME_COMPOSITION") == "0" {
		return "The peer's claims name its Composition in `spec.compositionRef`; function-widget's take the XRD's default."
	}
	return "Every variant's claims name their Composition in `spec.compositionRef`."
}

// writeVariantsTable writes the variants side by side: a column per
// variant, the median over its runs when there are several.
func writeVariantsTable(w func(string, ...any), vrs []*variantRuns) {
	runs := len(vrs[0].runs)
	w("### Variants side by side\n\n")
	w("`WIDGET_BENCH_E2E_VARIANTS=%s`: the same %d claims of the same XRD, composed into the same cluster-scoped Widget,\n", variantNames(vrs), vrs[0].runs[0].n)
	w("WidgetKey and connection details by another Composition: **function-widget** (examples/composition/legacy), or\n")
	w("**P&T**, function-patch-and-transform v0.5.0 then function-auto-ready v0.6.0 (`%s`). %s\n", ptComposition, compositionSelection())
	w("Each variant runs on a fresh control plane, one after the other in the same\n")
	w("benchmark process, their order rotated each run.")
	if runs > 1 {
		w(" Medians of %d runs each.", runs)
	}
	w("\nRequests and reconciles are those during the run (first create to all Ready); Ready losses are counted until the\n")
	w("end of the steady window. The provider's share is its own requests (`rest_client_requests_total`); Events are\n")
	w("counted for all clients, as kube-apiserver cannot tell who wrote them. A RunFunction call is a response core got\n")
	w("(`function_run_function_response_total`) but a v1 request refused as Unimplemented: function-patch-and-transform\n")
	w("v0.5.0 serves only v1beta1, so core sends each of its calls twice.\n\n")
	heads := make([]string, 0, len(vrs))
	for _, vr := range vrs {
		heads = append(heads, vr.v.title)
	}
	w("| what | %s |\n| --- |%s\n", strings.Join(heads, " | "), strings.Repeat(" ---: |", len(vrs)))
	for _, row := range variantRows {
		cells := make([]string, 0, len(vrs))
		for _, vr := range vrs {
			vs := make([]float64, 0, len(vr.runs))
			for _, r := range vr.runs {
				vs = append(vs, row.v(r, claimRun(r), vr))
			}
			cells = append(cells, fmt.Sprintf(row.format, medianF(vs)))
		}
		w("| %s | %s |\n", row.what, strings.Join(cells, " | "))
	}
	w("\n")
}

// A lossWindow is a span of time relative to the moment all claims of a
// run were Ready: from (inclusive) to to (exclusive).
type lossWindow struct {
	label    string
	from, to time.Duration
}

// lossWindows split a run into converging (before all Ready) and windows
// after it that grow with the time since, so that a control plane that
// settles shows its losses only at the top, and one that churns shows them
// all the way down.
var lossWindows = []lossWindow{
	{"before all were Ready", -1 << 62, 0},
	{"0-15 s after", 0, 15 * time.Second},
	{"15-60 s after", 15 * time.Second, time.Minute},
	{"1-2 min after", time.Minute, 2 * time.Minute},
	{"2-5 min after", 2 * time.Minute, 5 * time.Minute},
	{"5 min and more after", 5 * time.Minute, 1 << 62},
}

// countLosses counts the losses at, by lossWindows, relative to end.
func countLosses(at []time.Time, end time.Time) []int {
	n := make([]int, len(lossWindows))
	for _, a := range at {
		d := a.Sub(end)
		for i, lw := range lossWindows {
			if d >= lw.from && d < lw.to {
				n[i]++
				break
			}
		}
	}
	return n
}

// writeLossWindows writes when Ready was lost, by variant, over all runs:
// the losses over time, relative to the moment all claims were Ready.
func writeLossWindows(w func(string, ...any), vrs []*variantRuns) {
	heads := make([]string, 0, len(vrs))
	counts := make([][]int, 0, len(vrs))
	var longest time.Duration
	for _, vr := range vrs {
		heads = append(heads, vr.v.title)
		n := make([]int, len(lossWindows))
		for _, r := range vr.runs {
			for i, c := range countLosses(claimRun(r).losses, r.end) {
				n[i] += c
			}
			longest = max(longest, r.steady)
		}
		counts = append(counts, n)
	}
	w("Ready lost (a claim's or its XR's), over time: how many times in all runs, by when, relative to the moment all\n")
	w("claims of the run were Ready. The watches run until the end of the steady window (%s), so windows past it stay empty.\n\n", secs(longest))
	w("| when | %s |\n| --- |%s\n", strings.Join(heads, " | "), strings.Repeat(" ---: |", len(vrs)))
	for i, lw := range lossWindows {
		cells := make([]string, 0, len(vrs))
		for _, n := range counts {
			cells = append(cells, fmt.Sprintf("%d", n[i]))
		}
		w("| %s | %s |\n", lw.label, strings.Join(cells, " | "))
	}
	w("\n")
}

// writeVariantsPlot draws the time-to-Ready of each variant's claims, over
// all its runs, in panels on one time axis, and writes its link.
func writeVariantsPlot(t *testing.T, b *bench, w func(string, ...any), vrs []*variantRuns) {
	t.Helper()
	series := make([]histSeries, 0, len(vrs))
	for _, vr := range vrs {
		var ds []time.Duration
		for _, r := range vr.runs {
			ds = append(ds, r.toReady...)
		}
		series = append(series, histSeries{label: vr.v.title, ds: ds})
	}
	png := filepath.Join(b.docDir, "benchmarks-e2e-variants-time-to-ready.png")
	if err := writeHistograms(png, "time-to-Ready by variant", series); err != nil {
		t.Errorf("cannot write %s: %v", png, err)
		return
	}
	w("![Time-to-Ready by variant](%s)\n\n", filepath.Base(png))
	w("Time-to-Ready of every claim of every run, a panel per variant on one x axis (0 to the slowest claim of any variant,\n")
	w("40 bars); y axis: claims per bar, scaled to each panel's tallest.\n\n")
}

func variantNames(vrs []*variantRuns) string {
	ns := make([]string, 0, len(vrs))
	for _, vr := range vrs {
		ns = append(ns, vr.v.name)
	}
	return strings.Join(ns, ",")
}

// TestRunFunctionCalls checks that a call core retried as v1beta1 counts
// once.
func TestRunFunctionCalls(t *testing.T) {
	v1 := `grpc_method="/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction"`
	beta := `grpc_method="/apiextensions.fn.proto.v1beta1.FunctionRunnerService/RunFunction"`
	d := metricDelta{before: map[string]float64{}, after: map[string]float64{
		`function_run_function_response_total{function_name="widgetco-function-widget",` + v1 + `,grpc_code="OK",result_severity="Normal"}`:                5,
		`function_run_function_response_total{function_name="function-patch-and-transform",` + v1 + `,grpc_code="Unimplemented",result_severity="Normal"}`: 7,
		`function_run_function_response_total{function_name="function-patch-and-transform",` + beta + `,grpc_code="OK",result_severity="Normal"}`:          7,
		`function_run_function_response_total{function_name="function-auto-ready",` + v1 + `,grpc_code="OK",result_severity="Normal"}`:                     7,
	}}
	cases := map[string]struct {
		reason string
		fn     string
		want   float64
	}{
		"All":         {reason: "every function's calls, a retried one once", fn: "", want: 19},
		"PT":          {reason: "P&T's v1 refusals are not calls", fn: "function-patch-and-transform", want: 7},
		"AutoReady":   {reason: "a function that serves v1 is called once per call", fn: "function-auto-ready", want: 7},
		"FunctionWid": {reason: "function-widget's calls", fn: "widgetco-function-widget", want: 5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, runFunctionCalls(d, tc.fn)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWriteVariantsPlot checks that the plot of the variants is drawn next
// to the document and linked from it.
func TestWriteVariantsPlot(t *testing.T) {
	b := &bench{docDir: t.TempDir()}
	vrs := []*variantRuns{
		{v: variantWidget, runs: []*e2eRun{{toReady: []time.Duration{time.Second, 2 * time.Second}}}},
		{v: variantPT, runs: []*e2eRun{{toReady: []time.Duration{3 * time.Second}}, {toReady: []time.Duration{4 * time.Second}}}},
	}
	var doc strings.Builder
	writeVariantsPlot(t, b, func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }, vrs)
	if _, err := os.Stat(filepath.Join(b.docDir, "benchmarks-e2e-variants-time-to-ready.png")); err != nil {
		t.Errorf("the plot is not next to the document: %v", err)
	}
	if want := "![Time-to-Ready by variant](benchmarks-e2e-variants-time-to-ready.png)"; !strings.Contains(doc.String(), want) {
		t.Errorf("the section does not link the plot: want %q in\n%s", want, doc.String())
	}
}

// TestCountLosses checks how the losses of Ready are put into windows
// relative to the moment all claims were Ready.
func TestCountLosses(t *testing.T) {
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := end.Add
	cases := map[string]struct {
		reason string
		at     []time.Time
		want   []int
	}{
		"None": {reason: "no loss, no count", want: []int{0, 0, 0, 0, 0, 0}},
		"Converging": {
			reason: "a loss before all were Ready counts as converging",
			at:     []time.Time{at(-3 * time.Second), at(-time.Millisecond)},
			want:   []int{2, 0, 0, 0, 0, 0},
		},
		"Edges": {
			reason: "a window holds its start, not its end",
			at:     []time.Time{at(0), at(15 * time.Second), at(time.Minute), at(2 * time.Minute), at(5 * time.Minute), at(time.Hour)},
			want:   []int{0, 1, 1, 1, 1, 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, countLosses(tc.at, end)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
