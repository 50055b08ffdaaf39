//go:build linux

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

func init() { register(25, "steady", steadySection) }

// steadySection: the provider's steady state at the default poll interval
// for each count in WIDGET_BENCH_STEADY_COUNTS, with the change feed
// carrying out-of-band changes at a constant rate, and what doubling the
// count doubles (issue 16).
func steadySection(t *testing.T, b *bench) string {
	fields := strings.Split(envString("WIDGET_BENCH_STEADY_COUNTS", "10000,20000"), ",")
	counts := make([]int, 0, len(fields))
	for _, f := range fields {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c <= 0 {
			t.Fatalf("WIDGET_BENCH_STEADY_COUNTS: %q is not a count of Widgets", f)
		}
		counts = append(counts, c)
	}
	window := time.Duration(envInt("WIDGET_BENCH_STEADY_WINDOW_SECONDS", 600)) * time.Second
	every := time.Duration(envInt("WIDGET_BENCH_STEADY_DRIFT_MS", 1000)) * time.Millisecond
	settle := time.Duration(envInt("WIDGET_BENCH_STEADY_SETTLE_SECONDS", 60)) * time.Second
	const workers = 8
	k := b.kube(t)
	bin := b.build(t, "provider-widget", "./provider")
	left := removeLeftoverWidgets(t, k)
	load0 := loadAvg()

	// WIDGET_BENCH_PROVIDER_BASELINE, when set, is another build of the
	// provider that runs each count too, right before this build.
	baseline := os.Getenv("WIDGET_BENCH_PROVIDER_BASELINE")
	rs := make([]providerRun, 0, len(counts))
	var bases []providerRun
	for i, n := range counts {
		opts := runOpts{n: n, workers: workers, settle: settle, steady: window, steadyDrift: every, args: envArgs("WIDGET_BENCH_PROVIDER_ARGS")}
		if baseline != "" {
			opts.ns = fmt.Sprintf("steady-base-%d", i)
			r := runProvider(t, k, baseline, opts)
			t.Logf("baseline: steady state at %d Widgets: %s", n, steadyRow(r, window))
			bases = append(bases, r)
		}
		opts.ns = fmt.Sprintf("steady-scale-%d", i)
		r := runProvider(t, k, bin, opts)
		t.Logf("steady state at %d Widgets: %s", n, steadyRow(r, window))
		rs = append(rs, r)
	}
	return steadyDoc(rs, window, every, settle, left, load0) + steadyBaselineDoc(bases, rs, baseline)
}

// steadyBaselineDoc compares each run with the baseline's run of the same
// count right before it; empty without a baseline.
func steadyBaselineDoc(bases, rs []providerRun, baseline string) string {
	if len(bases) == 0 {
		return ""
	}
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	w("With `WIDGET_BENCH_PROVIDER_BASELINE=%s`, that build ran each count right before this one, on the same API server:\n\n", baseline)
	w("| Widgets | RSS after the window, baseline (MiB) | this build (MiB) | ratio | CPU in the window, baseline (s) | this build (s) | ratio | kube-apiserver requests, baseline | this build |\n")
	w("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for i, b := range bases {
		r := rs[i]
		w("| %d | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f | %.0f | %.0f |\n", r.n,
			float64(b.rssKB)/1024, float64(r.rssKB)/1024, float64(r.rssKB)/float64(b.rssKB),
			b.steadyCPU.Seconds(), r.steadyCPU.Seconds(), r.steadyCPU.Seconds()/b.steadyCPU.Seconds(),
			b.steadyKube, r.steadyKube)
	}
	w("\n")
	return doc.String()
}

// steadyFigure is one figure of a steady window, as a total and per hour.
type steadyFigure struct {
	name string
	of   func(r providerRun) float64
}

var steadyFigures = []steadyFigure{
	{"reconciles", func(r providerRun) float64 { return r.steadyRecs }},
	{"Widget API: widget reads (`get widget`: polls and repairs)", func(r providerRun) float64 { return r.steadyOps["get widget"] }},
	{"Widget API: writes (repairs)", func(r providerRun) float64 {
		return r.steadyOps["replace widget"] + r.steadyOps["patch widget"]
	}},
	{"Widget API: change feed (`list changes`)", func(r providerRun) float64 { return r.steadyOps["list changes"] }},
	{"Widget API: all requests", func(r providerRun) float64 { return sum(r.steadyOps) }},
	{"kube-apiserver requests", func(r providerRun) float64 { return r.steadyKube }},
	{"out-of-band changes sent", func(r providerRun) float64 { return float64(r.steadyChanges) }},
	{"drift repairs (`widget_updates_total{cause=\"drift\"}`)", func(r providerRun) float64 { return r.steadyRepairs }},
	{"provider CPU seconds", func(r providerRun) float64 { return r.steadyCPU.Seconds() }},
}

func steadyRow(r providerRun, window time.Duration) string {
	parts := make([]string, 0, len(steadyFigures))
	for _, f := range steadyFigures {
		parts = append(parts, fmt.Sprintf("%s %.0f", f.name, f.of(r)))
	}
	calls := make([]string, 0, len(r.steadyByCall))
	for _, m := range sortedKeys(r.steadyByCall) {
		if r.steadyByCall[m] > 0 {
			calls = append(calls, fmt.Sprintf("%s %.0f", m, r.steadyByCall[m]))
		}
	}
	return fmt.Sprintf("in %s: %s; RSS %d KiB; kube-apiserver requests by method and code: %s", window, strings.Join(parts, ", "), r.rssKB, strings.Join(calls, ", "))
}

func steadyDoc(rs []providerRun, window, every, settle time.Duration, left int, load0 string) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	hours := window.Hours()
	w("## provider-widget: steady state at scale, the change feed carrying drift\n\n")
	w("For each count: a Widget API server and provider-widget with its defaults (`--poll-interval=10m`, change feed on),\n")
	w("that many new Widgets created by 8 clients and all Ready, %s to settle, then a window of %s in which the bench\n", settle, window)
	w("resizes one random widget out of band every %s through the Widget API (someone changing it by hand; the change\n", every)
	w("feed tells the provider, which puts it back). Everything below is counted over the window and scaled to an hour.\n")
	w("Load average %s at the start", load0)
	if left > 0 {
		w("; %d Widgets that earlier sections left behind were removed first", left)
	}
	w(".\n\n")
	w("| | ")
	for _, r := range rs {
		w("%d Widgets: per hour | per Widget per hour | ", r.n)
	}
	w("\n| --- |")
	for range rs {
		w(" ---: | ---: |")
	}
	w("\n")
	for _, f := range steadyFigures {
		w("| %s |", f.name)
		for _, r := range rs {
			v := f.of(r) / hours
			w(" %.0f | %.3f |", v, v/float64(r.n))
		}
		w("\n")
	}
	w("| provider RSS at the end of the window (MiB) |")
	for _, r := range rs {
		w(" %.0f | |", float64(r.rssKB)/1024)
	}
	w("\n| all Ready after creating (s) |")
	for _, r := range rs {
		w(" %.0f | |", r.allReady.Seconds())
	}
	w("\n\n")
	for _, r := range rs {
		w("kube-apiserver requests in the window at %d Widgets, by method and code:", r.n)
		for _, m := range sortedKeys(r.steadyByCall) {
			if r.steadyByCall[m] > 0 {
				w(" %s %.0f;", m, r.steadyByCall[m])
			}
		}
		w("\n")
	}
	w("\n")
	if len(rs) < 2 {
		return doc.String()
	}
	a, z := rs[0], rs[len(rs)-1]
	w("What %d Widgets cost per hour against %d (ratio of the totals, %.1f times the Widgets):\n\n", z.n, a.n, float64(z.n)/float64(a.n))
	w("| | ratio |\n| --- | ---: |\n")
	for _, f := range steadyFigures {
		if f.of(a) == 0 {
			w("| %s | %.0f against 0 |\n", f.name, f.of(z))
			continue
		}
		w("| %s | %.2f |\n", f.name, f.of(z)/f.of(a))
	}
	w("\n")
	return doc.String()
}

// driftSteadily resizes one random widget of the Widgets in ns out of band
// every `every` for `window`, through the Widget API at url, and returns
// how many changes it sent.
func driftSteadily(t *testing.T, k *kubeEnv, ns, url string, every, window time.Duration) int {
	t.Helper()
	ctx := context.Background()
	_, widgets := managedWidgets(t, k, ns)
	if len(widgets) == 0 {
		t.Fatalf("no Widget in %s has an external name", ns)
	}
	api, err := widgetapi.New(url, widgetapi.WithToken("bench-token"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(len(widgets)), 16))
	sent := 0
	tick := time.NewTicker(every)
	defer tick.Stop()
	for end := time.Now().Add(window); time.Now().Before(end); <-tick.C {
		name := widgets[rng.IntN(len(widgets))]
		if _, err := api.PatchWidget(ctx, name, widgetapi.PatchWidgetRequest{Size: ptr.To(widgetapi.SizeLarge)}); err != nil {
			t.Errorf("cannot change widget %s: %v", name, err)
			continue
		}
		sent++
	}
	return sent
}
