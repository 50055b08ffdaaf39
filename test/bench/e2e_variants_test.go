package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// An e2eVariant is a way of composing the run's claims: the same XRD, the
// same claims and the same managed resources, composed by another
// Composition. Issue 34 asks whether the usual way (function-patch-and-
// transform and function-auto-ready) settles where function-widget does not,
// on the same core, machine and load.
type e2eVariant struct {
	name  string // as WIDGET_BENCH_E2E_VARIANTS names it
	title string // as the report's column names it
	// composition is the Composition its claims select by
	// spec.compositionRef, or "" for the XRD's default (function-widget's).
	composition string
	// firstStep is the function of the pipeline's first step, installed
	// under that name: its calls are the pipeline's runs.
	firstStep string
	// install sets the variant up on a control plane that has the platform
	// installed (nil: nothing to add).
	install func(ctx context.Context, t *testing.T, e *e2eEnv)
}

var (
	variantWidget = &e2eVariant{name: "widget", title: "function-widget", firstStep: platform.FunctionName}
	variantPT     = &e2eVariant{
		name: "pt", title: "P&T v0.5.0 + auto-ready v0.6.0", composition: "xwidgets-pt.legacy.platform.widgetco.io",
		firstStep: fnPT, install: installPT,
	}
)

// The peer functions, under the names the peer Composition calls them by.
const (
	fnPT        = "function-patch-and-transform"
	fnAutoReady = "function-auto-ready"
	// ptComposition is the peer Composition, relative to the module root.
	ptComposition = "test/bench/testdata/pt-composition.yaml"
)

// parseVariants reads WIDGET_BENCH_E2E_VARIANTS: variant names, comma
// separated, each once. Empty means function-widget only, the section's
// behaviour before variants existed.
func parseVariants(s string) ([]*e2eVariant, error) {
	if strings.TrimSpace(s) == "" {
		return []*e2eVariant{variantWidget}, nil
	}
	var vs []*e2eVariant
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc([]*e2eVariant{variantWidget, variantPT}, func(v *e2eVariant) bool { return v.name == n })
		if i < 0 {
			return nil, errors.Errorf("unknown variant %q: want widget or pt", n)
		}
		v := []*e2eVariant{variantWidget, variantPT}[i]
		if slices.Contains(vs, v) {
			return nil, errors.Errorf("variant %q is named twice", n)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// e2eVariants is the variants of the section, from WIDGET_BENCH_E2E_VARIANTS.
// The peer composes claims only: it has no Composition for namespaced
// XWidgets, so it does not mix with WIDGET_BENCH_E2E_MIX=half.
func e2eVariants(t *testing.T, mix []*e2eKind) []*e2eVariant {
	t.Helper()
	vs, err := parseVariants(os.Getenv("WIDGET_BENCH_E2E_VARIANTS"))
	if err != nil {
		t.Fatalf("WIDGET_BENCH_E2E_VARIANTS: %v", err)
	}
	if slices.Contains(vs, variantPT) && slices.ContainsFunc(mix, func(k *e2eKind) bool { return k.gvk != gvkClaim }) {
		t.Fatal("WIDGET_BENCH_E2E_VARIANTS=pt composes claims only: unset WIDGET_BENCH_E2E_MIX")
	}
	return vs
}

// variantOrder is the order of the variants in run i (from 0): rotated by
// one each run, so that over several runs each variant goes first as often
// as the others and what the machine carries from one control plane to the
// next (page cache, the Go build cache, other work's phases) does not
// favour one.
func variantOrder(vs []*e2eVariant, i int) []*e2eVariant {
	out := make([]*e2eVariant, 0, len(vs))
	for j := range vs {
		out = append(out, vs[(i+j)%len(vs)])
	}
	return out
}

// selectComposition makes the objects of mk select the variant's
// Composition, when it has one, by spec.compositionRef: core then never
// looks at the XRD's default.
func (v *e2eVariant) selectComposition(mk func(ns, name string) *unstructured.Unstructured) func(ns, name string) *unstructured.Unstructured {
	if v == nil || v.composition == "" {
		return mk
	}
	return func(ns, name string) *unstructured.Unstructured {
		u := mk(ns, name)
		_ = unstructured.SetNestedField(u.Object, v.composition, "spec", "compositionRef", "name")
		return u
	}
}

// peerPackages are the peer functions' packages, built once per benchmark
// process from the binaries hack/tools.sh builds.
var peerPackages = struct {
	once sync.Once
	pkgs map[string]string // function -> .xpkg
	err  error
}{}

// installPT installs function-patch-and-transform and function-auto-ready
// through Crossplane's package manager, as the upstream reproduction in
// test/e2e does, and creates the peer Composition.
func installPT(ctx context.Context, t *testing.T, e *e2eEnv) {
	t.Helper()
	peerPackages.once.Do(func() {
		peerPackages.pkgs, peerPackages.err = buildPeers(ctx, filepath.Join(e.root, "_output", "bench", "peers"))
	})
	if peerPackages.err != nil {
		t.Fatalf("the pt variant needs the peer functions (bash hack/tools.sh %s %s; eval \"$(bash hack/tools.sh env)\"): %v", fnPT, fnAutoReady, peerPackages.err)
	}
	for _, f := range []struct{ name, tag string }{{fnPT, "v0.5.0"}, {fnAutoReady, "v0.6.0"}} {
		ref, err := e.h.PushPackage(ctx, peerPackages.pkgs[f.name], f.name+":"+f.tag)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.h.InstallFunction(ctx, f.name, ref, harness.InstallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := platform.ReadObjects(filepath.Join(e.root, ptComposition))
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.Create(ctx, e.h.Client(), objs...); err != nil {
		t.Fatal(err)
	}
}

// buildPeers packages the peer functions' binaries into dir.
func buildPeers(ctx context.Context, dir string) (map[string]string, error) {
	tools, err := harness.ToolsFromEnv()
	if err != nil {
		return nil, errors.Wrap(err, "cannot find the tools")
	}
	pkgs := map[string]string{}
	for _, f := range []struct{ name, env string }{{fnPT, "FUNCTION_PATCH_AND_TRANSFORM_BIN"}, {fnAutoReady, "FUNCTION_AUTO_READY_BIN"}} {
		bin := os.Getenv(f.env)
		if bin == "" {
			return nil, errors.Errorf("%s is unset", f.env)
		}
		p, err := harness.BuildFunction(ctx, tools.Crank, dir, f.name, bin)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot build the %s package", f.name)
		}
		pkgs[f.name] = p
	}
	return pkgs, nil
}

// variantRuns are the runs of one variant, in the order they ran, and the
// control plane of its last run (for the report's details).
type variantRuns struct {
	v    *e2eVariant
	runs []*e2eRun
	env  *e2eEnv
}

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
	{"core reconciles per claim (claim and XR controllers)", "%.1f", func(r *e2eRun, k *kindRun, _ *variantRuns) float64 {
		return k.kind.coreReconciles(r.core) / float64(r.n)
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

// writeVariantsTable writes the variants side by side: a column per
// variant, the median over its runs when there are several.
func writeVariantsTable(w func(string, ...any), vrs []*variantRuns) {
	runs := len(vrs[0].runs)
	w("### Variants side by side\n\n")
	w("`WIDGET_BENCH_E2E_VARIANTS=%s`: the same %d claims of the same XRD, composed into the same cluster-scoped Widget,\n", variantNames(vrs), vrs[0].runs[0].n)
	w("WidgetKey and connection details by another Composition: **function-widget** (examples/composition/legacy), or\n")
	w("**P&T**, function-patch-and-transform v0.5.0 then function-auto-ready v0.6.0 (`%s`, selected by the\n", ptComposition)
	w("claims' `spec.compositionRef`). Each variant runs on a fresh control plane, one after the other in the same\n")
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

// logRun logs how a run of variant v went.
func logRun(t *testing.T, v *e2eVariant, i, n int, r *e2eRun) {
	t.Helper()
	k := claimRun(r)
	t.Logf("e2e run %d (%s): %d of %d Ready in %s, p50 %s, max %s; claim Ready lost %d times, XR Ready %d times; %d Ready at the end of the steady window",
		i+1, v.name, r.ready, n, r.allReady.Round(10*time.Millisecond), quantile(r.toReady, .5).Round(10*time.Millisecond),
		quantile(r.toReady, 1).Round(10*time.Millisecond), k.flaps[stReady], k.flaps[stXRReady], k.readyEnd)
}

// TestParseVariants checks WIDGET_BENCH_E2E_VARIANTS (it runs without
// WIDGET_BENCH).
func TestParseVariants(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   []string
		err    bool
	}{
		"Default": {reason: "unset, the section runs function-widget only, as before variants", in: "", want: []string{"widget"}},
		"Both":    {reason: "variants run in the order given", in: "pt, widget", want: []string{"pt", "widget"}},
		"Unknown": {reason: "an unknown variant is an error, not skipped", in: "widget,kcl", err: true},
		"Twice":   {reason: "a variant named twice is an error", in: "pt,pt", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vs, err := parseVariants(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s: err = %v, want error %t", tc.reason, err, tc.err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.name)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
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

// TestVariantOrder checks that each variant goes first in turn.
func TestVariantOrder(t *testing.T) {
	vs := []*e2eVariant{variantWidget, variantPT}
	cases := map[string]struct {
		reason string
		run    int
		want   []string
	}{
		"FirstRun":  {reason: "the first run keeps the given order", run: 0, want: []string{"widget", "pt"}},
		"SecondRun": {reason: "the second run starts with the second variant", run: 1, want: []string{"pt", "widget"}},
		"ThirdRun":  {reason: "the third run starts over", run: 2, want: []string{"widget", "pt"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, v := range variantOrder(vs, tc.run) {
				got = append(got, v.name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSelectComposition checks that the pt variant's claims select its
// Composition and function-widget's keep the XRD's default.
func TestSelectComposition(t *testing.T) {
	mk := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"region": "eu-west-1"}}}
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	cases := map[string]struct {
		reason string
		v      *e2eVariant
		want   string
	}{
		"Widget": {reason: "function-widget's claims name no Composition", v: variantWidget, want: ""},
		"PT":     {reason: "the peer's claims name the peer Composition", v: variantPT, want: "xwidgets-pt.legacy.platform.widgetco.io"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := tc.v.selectComposition(mk)("ns", "c-0000")
			got, _, _ := unstructured.NestedString(u.Object, "spec", "compositionRef", "name")
			if diff := cmp.Diff(tc.want, got); diff != "" {
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
