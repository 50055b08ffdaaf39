package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBenchmarks measures everything and writes docs/benchmarks.md and its
// plot. It is a benchmark, not a test: it asserts nothing about speed.
func TestBenchmarks(t *testing.T) {
	if os.Getenv("WIDGET_BENCH") != "1" {
		t.Skip("WIDGET_BENCH is not 1: benchmarks run with `make bench`")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("WIDGET_BENCH_OUT")
	if out == "" {
		out = filepath.Join(root, "docs", "benchmarks.md")
	}
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	nproc, load0, started := runtime.NumCPU(), loadAvg(), time.Now()

	// Function, in process.
	inproc, cmdline := benchInProcess(t, root, 5)
	t.Logf("in-process: %+v", inproc)

	// Function over gRPC, against function-auto-ready.
	dir := t.TempDir()
	fnBin := buildFunction(t, root, dir)
	peerBin := os.Getenv("FUNCTION_AUTO_READY_BIN")
	if peerBin == "" {
		t.Fatal("FUNCTION_AUTO_READY_BIN is unset: run `bash hack/tools.sh all` and eval \"$(bash hack/tools.sh env)\"")
	}
	ours := startFunction(t, "function-widget", fnBin, "--metrics-address=")
	peer := startFunction(t, "function-auto-ready", peerBin)
	calls := envInt("WIDGET_BENCH_CALLS", 2000)
	grpcRes := make([]grpcResult, 0, 3)
	for _, sc := range []struct {
		name  string
		keys  int
		ready bool
	}{
		{"new XWidget, 3 keys (nothing observed yet)", 3, false},
		{"ready XWidget, 3 keys (Widget + 3 WidgetKeys observed Ready)", 3, true},
		{"ready XWidget, 10 keys (the XRD's maximum)", 10, true},
	} {
		r := benchGRPC(t, sc.name, fnRequest(sc.keys, sc.ready), calls, ours, peer)
		t.Logf("grpc %s: %+v", sc.name, r)
		grpcRes = append(grpcRes, r)
	}

	// Provider.
	n := envInt("WIDGET_BENCH_N", 200)
	runs := envInt("WIDGET_BENCH_RUNS", 1)
	const workers = 8
	steady := time.Duration(envInt("WIDGET_BENCH_STEADY_SECONDS", 30)) * time.Second
	var extra []string
	if a := os.Getenv("WIDGET_BENCH_PROVIDER_ARGS"); a != "" {
		extra = strings.Fields(a)
	}
	k := startKube(t, root)
	provBin := buildProvider(t, root, dir)
	pr := make([]providerRun, 0, runs)
	for i := range runs {
		r := runProvider(t, k, provBin, i, n, workers, steady, extra)
		t.Logf("provider run %d: all Ready in %s, p50 %s, p99 %s, raw ConfigMaps %s", i, r.allReady, quantile(r.toReady, .5), quantile(r.toReady, .99), r.rawCreate)
		pr = append(pr, r)
	}

	// The document.
	w("# Benchmarks\n\n")
	w("Written by `make bench` (`WIDGET_BENCH=1 go test -run TestBenchmarks ./test/bench/`, see\n")
	w("[test/bench/doc.go](../test/bench/doc.go) for its knobs). Benchmarks, never timed assertions:\n")
	w("the numbers move with the machine's load, so each comes with its conditions.\n\n")
	w("**Machine:** %d CPUs (`nproc`), %s/%s, %s; load average %s at the start, %s at the end; took %s.\n\n",
		nproc, runtime.GOOS, runtime.GOARCH, runtime.Version(), load0, loadAvg(), time.Since(started).Round(time.Second))

	w("## function-widget, in process\n\n")
	w("`%s` (medians of %d runs). `function` is `package main`, so these are the\n", cmdline, 5)
	w("function's own Go benchmarks; the key-count scenarios and p50/p99 are measured over gRPC below.\n\n")
	w("| benchmark | ns/op | B/op | allocs/op | runs |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range inproc {
		w("| %s | %.0f | %.0f | %.0f | %d |\n", r.name, r.nsOp, r.bytesOp, r.allocs, r.runs)
	}

	w("\n## function-widget vs function-auto-ready over gRPC\n\n")
	w("**The peer the issue asks for, function-patch-and-transform v0.9.0, cannot be built here:** the Go\n")
	w("module proxy answers 403 for its `.mod` and `.zip`. The only function peer available is\n")
	w("function-auto-ready v0.6.0 (`bash hack/tools.sh all`). It does much less work than function-widget:\n")
	w("it only marks observed composed resources ready and composes nothing, validates no policy and\n")
	w("writes no conditions, status or connection details. The ratio below is therefore an upper bound on\n")
	w("what function-widget's own logic costs over the function SDK's serving and (un)marshalling floor,\n")
	w("not a comparison with a function doing the same job.\n\n")
	w("Both binaries served on 127.0.0.1 free ports with `--insecure`; one gRPC client each on loopback;\n")
	w("the same RunFunctionRequest to both, alternating which goes first, 200 warm-up calls each, then %d\n", calls)
	w("calls each, one at a time. Latency is the client's, connection reused. Requests: the namespaced XWidget\n")
	w("team-a/web under the examples' WidgetPolicy with `maxKeys` raised to the key count. The issue's \"50 keys\"\n")
	w("is not possible: the function caps keys at 10 whatever the input says (`v1beta1.MaxKeys`), so the large\n")
	w("case uses 10.\n\n")
	w("| scenario | function-widget p50 | p99 | function-auto-ready p50 | p99 | ratio p50 | ratio p99 | desired resources |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range grpcRes {
		o50, o99 := r.p50[ours.name], r.p99[ours.name]
		p50, p99 := r.p50[peer.name], r.p99[peer.name]
		w("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %d |\n", r.scenario, us(o50), us(o99), us(p50), us(p99),
			float64(o50)/float64(p50), float64(o99)/float64(p99), r.desired)
	}

	w("\n## provider-widget: %d Widgets to Ready\n\n", n)
	w("envtest (kube-apiserver v1.35.4 + etcd, from `hack/tools.sh`) with the provider's CRDs; the\n")
	w("provider binary as a subprocess with `%s` (plus `--kubeconfig`); the reference Widget API in the\n", strings.Join(append([]string{"--metrics-bind-address <free port> --health-probe-bind-address 0"}, pr[0].args[4:]...), " "))
	w("test process over loopback HTTP (no contract checker), with **zero provisioning delay and no rate limit**,\n")
	w("one project, one namespaced ProviderConfig. The provider is started and serving metrics first; then %d\n", n)
	w("Widgets (size medium, one label) are created by %d concurrent clients, and a watch records when each is\n", workers)
	w("first Ready=True. Time-to-Ready is from the Widget's create request to that watch event. In the same run\n")
	w("and before the provider starts, the same %d clients create %d plain ConfigMaps: what the API server takes.\n\n", workers, n)
	w("| run | all Ready | per Widget p50 | p90 | p99 | max | Widgets Ready/s | raw ConfigMap creates/s | provider rate / raw | reconciles | reconciles/s | kube-apiserver requests/Widget | Widget API requests/Widget | provider RSS |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	rates, raws, ratios := make([]float64, 0, len(pr)), make([]float64, 0, len(pr)), make([]float64, 0, len(pr))
	for i, r := range pr {
		rate := float64(n) / r.allReady.Seconds()
		raw := float64(r.rawCreateCount) / r.rawCreate.Seconds()
		rates, raws, ratios = append(rates, rate), append(raws, raw), append(ratios, rate/raw)
		w("| %d | %s | %s | %s | %s | %s | %.1f | %.0f | %.1f%% | %.0f | %.1f | %.1f | %.1f | %.0f MB |\n", i+1,
			secs(r.allReady), secs(quantile(r.toReady, .5)), secs(quantile(r.toReady, .9)), secs(quantile(r.toReady, .99)), secs(quantile(r.toReady, 1)),
			rate, raw, 100*rate/raw, r.reconciles, r.reconciles/r.allReady.Seconds(), r.kubeRequests/float64(n), r.apiTotal/float64(n), float64(r.rssKB)/1024)
	}
	if len(pr) > 1 {
		w("| median | | | | | | %.1f | %.0f | %.1f%% | | | | | |\n", medianF(rates), medianF(raws), 100*medianF(ratios))
	}
	last := pr[len(pr)-1]
	w("\nWidget API requests during creation (last run), by operation:\n\n| operation | requests | per Widget |\n| --- | ---: | ---: |\n")
	for _, op := range sortedKeys(last.apiRequests) {
		w("| %s | %.0f | %.2f |\n", op, last.apiRequests[op], last.apiRequests[op]/float64(n))
	}
	if last.steady > 0 {
		per := float64(time.Hour) / float64(last.steady) / float64(n)
		w("\n**Steady state** (last run): in the %s after all were Ready, %.0f reconciles, %.0f kube-apiserver\n", last.steady, last.steadyRecs, last.steadyKube)
		w("requests and %.0f Widget API requests (including change-feed long polls), i.e. about %.1f, %.1f and %.1f per\n", last.steadyAPI, last.steadyRecs*per, last.steadyKube*per, last.steadyAPI*per)
		w("Widget per hour if extrapolated linearly. The window is much shorter than the poll interval, so this is a rough\n")
		w("figure: a proper steady-state measurement needs a window of several poll intervals.\n")
	}
	png := strings.TrimSuffix(out, ".md") + "-time-to-ready.png"
	if err := writeHistogram(png, last.toReady); err != nil {
		t.Fatal(err)
	}
	w("\n![time-to-Ready histogram](%s)\n\n", filepath.Base(png))
	w("Time-to-Ready of the last run's %d Widgets: %s; x axis 0 to %s (the slowest), one bar per\n", n, filepath.Base(png), secs(quantile(last.toReady, 1)))
	w("1/40 of it; y axis: Widgets per bar, scaled to the tallest. Grid lines every 1/4 of each axis.\n")

	if err := os.WriteFile(out, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and %s", out, png)
}

// writeHistogram draws a histogram of ds as a PNG: 40 bars from 0 to the
// largest value, no text (the document says what the axes are).
func writeHistogram(path string, ds []time.Duration) error {
	const wdt, hgt, pad, bins = 800, 400, 20, 40
	img := image.NewRGBA(image.Rect(0, 0, wdt, hgt))
	for y := range hgt {
		for x := range wdt {
			img.Set(x, y, color.White)
		}
	}
	maxD := quantile(ds, 1)
	counts := make([]int, bins)
	for _, d := range ds {
		i := 0
		if maxD > 0 {
			i = min(int(float64(d)/float64(maxD)*bins), bins-1)
		}
		counts[i]++
	}
	top := 1
	for _, c := range counts {
		top = max(top, c)
	}
	grid := color.RGBA{220, 220, 220, 255}
	for q := 1; q <= 4; q++ {
		y := hgt - pad - q*(hgt-2*pad)/4
		for x := pad; x < wdt-pad; x++ {
			img.Set(x, y, grid)
		}
		x := pad + q*(wdt-2*pad)/4
		for y := pad; y < hgt-pad; y++ {
			img.Set(x, y, grid)
		}
	}
	bw := (wdt - 2*pad) / bins
	bar := color.RGBA{52, 101, 164, 255}
	for i, c := range counts {
		h := c * (hgt - 2*pad) / top
		for x := pad + i*bw + 1; x < pad+(i+1)*bw-1; x++ {
			for y := hgt - pad - h; y < hgt-pad; y++ {
				img.Set(x, y, bar)
			}
		}
	}
	for x := pad; x < wdt-pad; x++ {
		img.Set(x, hgt-pad, color.Black)
	}
	for y := pad; y <= hgt-pad; y++ {
		img.Set(pad, y, color.Black)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
