package bench

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// section is one part of docs/benchmarks.md. Each file registers its
// sections from init, with an order that places them in the document.
type section struct {
	order int
	name  string
	run   func(t *testing.T, b *bench) string // returns markdown starting with "## "
}

var sections []section

func register(order int, name string, run func(t *testing.T, b *bench) string) {
	sections = append(sections, section{order: order, name: name, run: run})
}

// bench is what sections share: paths, and the expensive parts (envtest,
// binaries) started or built once, on first use.
type bench struct {
	root   string // the repository
	dir    string // scratch, removed at the end
	docDir string // where the document and its plots go

	kubeOnce sync.Once
	kubeEnv  *kubeEnv
}

// kube returns the shared envtest (kube-apiserver + etcd with the
// provider's CRDs), starting it on first use.
func (b *bench) kube(t *testing.T) *kubeEnv {
	t.Helper()
	b.kubeOnce.Do(func() { b.kubeEnv = startKube(t, b.root) })
	if b.kubeEnv == nil {
		t.Fatal("envtest did not start")
	}
	return b.kubeEnv
}

// build builds the package pkg (relative to the repository, e.g.
// ./provider) once per run and returns the binary's path.
func (b *bench) build(t *testing.T, _, pkg string) string {
	t.Helper()
	bin, err := proc.Build(context.Background(), path.Join("github.com/widgetco/crossplane-widget", pkg))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestBenchmarks measures everything and writes docs/benchmarks.md and its
// plots. It is a benchmark, not a test: it asserts nothing about speed.
// WIDGET_BENCH_ONLY=provider,drift runs only those sections and then writes
// to _output/bench/ unless WIDGET_BENCH_OUT says otherwise, so that a
// partial run never replaces the published document.
func TestBenchmarks(t *testing.T) {
	if os.Getenv("WIDGET_BENCH") != "1" {
		t.Skip("WIDGET_BENCH is not 1: benchmarks run with `make bench`")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("WIDGET_BENCH_ONLY"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			only[n] = true
		}
	}
	out := os.Getenv("WIDGET_BENCH_OUT")
	switch {
	case out != "":
	case len(only) > 0:
		out = filepath.Join(root, "_output", "bench", "benchmarks.md")
	default:
		out = filepath.Join(root, "docs", "benchmarks.md")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &bench{root: root, dir: t.TempDir(), docDir: filepath.Dir(out)}

	slices.SortStableFunc(sections, func(a, b section) int { return a.order - b.order })
	names := make([]string, 0, len(sections))
	for _, s := range sections {
		names = append(names, s.name)
	}
	for n := range only {
		if !slices.Contains(names, n) {
			t.Fatalf("WIDGET_BENCH_ONLY names %q; the sections are %s", n, strings.Join(names, ", "))
		}
	}

	nproc, load0, started := runtime.NumCPU(), loadAvg(), time.Now()
	parts := make([]string, 0, len(sections))
	for _, s := range sections {
		if len(only) > 0 && !only[s.name] {
			continue
		}
		t0 := time.Now()
		t.Logf("section %s: starting", s.name)
		parts = append(parts, strings.TrimSpace(s.run(t, b)))
		t.Logf("section %s: done in %s", s.name, time.Since(t0).Round(time.Second))
		if t.Failed() {
			t.FailNow()
		}
	}

	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	w("# Benchmarks\n\n")
	w("Written by `make bench` (`WIDGET_BENCH=1 go test -run TestBenchmarks ./test/bench/`, see\n")
	w("[test/bench/doc.go](../test/bench/doc.go) for its knobs). Benchmarks, never timed assertions:\n")
	w("the numbers move with the machine's load, so each comes with its conditions.\n\n")
	w("**Machine:** %d CPUs (`nproc`), %s/%s, %s; load average %s at the start, %s at the end; took %s.\n\n",
		nproc, runtime.GOOS, runtime.GOARCH, runtime.Version(), load0, loadAvg(), time.Since(started).Round(time.Second))
	w("%s\n", strings.Join(parts, "\n\n"))
	if err := os.WriteFile(out, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// writeHistogram draws one histogram of ds as a PNG.
func writeHistogram(path string, ds []time.Duration) error {
	return writeHistograms(path, "", []histSeries{{ds: ds}})
}

// histSeries is one panel of writeHistograms.
type histSeries struct {
	label string
	ds    []time.Duration
}

// writeHistograms draws one histogram per series, stacked, on a shared x
// axis in seconds from 0 to the largest value, 40 bars each, with tick
// labels, each panel's label and its largest bar's count.
func writeHistograms(path, title string, series []histSeries) error {
	const wdt, panel, left, right, top, bottom, bins = 860, 220, 60, 20, 30, 40, 40
	hgt := top + len(series)*panel + bottom
	img := image.NewRGBA(image.Rect(0, 0, wdt, hgt))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text := func(x, y int, c color.Color, s string) {
		d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	var maxD time.Duration
	for _, s := range series {
		maxD = max(maxD, quantile(s.ds, 1))
	}
	if title != "" {
		text(left, 18, color.Black, title)
	}
	grid, bar := color.RGBA{220, 220, 220, 255}, color.RGBA{52, 101, 164, 255}
	plotW := wdt - left - right
	bw := plotW / bins
	for p, s := range series {
		y0, y1 := top+p*panel+18, top+(p+1)*panel-8 // plot area of this panel
		counts := make([]int, bins)
		for _, d := range s.ds {
			i := 0
			if maxD > 0 {
				i = min(int(float64(d)/float64(maxD)*bins), bins-1)
			}
			counts[i]++
		}
		tallest := 1
		for _, c := range counts {
			tallest = max(tallest, c)
		}
		for q := 0; q <= 4; q++ {
			x := left + q*bins*bw/4
			for y := y0; y <= y1; y++ {
				img.Set(x, y, grid)
			}
		}
		for x := left; x < left+bins*bw; x++ {
			img.Set(x, y0, grid)
		}
		for i, c := range counts {
			h := c * (y1 - y0) / tallest
			for x := left + i*bw + 1; x < left+(i+1)*bw-1; x++ {
				for y := y1 - h; y < y1; y++ {
					img.Set(x, y, bar)
				}
			}
		}
		for x := left; x <= left+bins*bw; x++ {
			img.Set(x, y1, color.Black)
		}
		for y := y0; y <= y1; y++ {
			img.Set(left, y, color.Black)
		}
		text(left+6, y0-4, color.Black, fmt.Sprintf("%s (n=%d)", s.label, len(s.ds)))
		text(4, y0+10, color.Black, fmt.Sprintf("%d", tallest))
		text(4, y1, color.Black, "0")
	}
	yAxis := top + len(series)*panel - 8
	for q := 0; q <= 4; q++ {
		x := left + q*bins*bw/4
		text(x-10, yAxis+16, color.Black, fmt.Sprintf("%.1f", maxD.Seconds()*float64(q)/4))
	}
	text(left+plotW/2-90, yAxis+32, color.Black, "seconds from create to Ready")
	text(4, top+8, color.Black, "count")
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
