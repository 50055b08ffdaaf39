//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestBenchmarks measures everything and writes a report with its plots to
// _output/bench/benchmarks.md (or WIDGET_BENCH_OUT). It is a benchmark, not a
// test: it asserts nothing about speed. WIDGET_BENCH_ONLY=provider,drift runs
// only those sections. docs/benchmarks.md is the curated current state: a
// run's figures are carried there by hand, with their conditions, and the
// run's report goes to the run history, notes/benchmarks-history.md.
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
	if out == "" {
		out = filepath.Join(root, "_output", "bench", "benchmarks.md")
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

// envInt returns the integer in the environment variable name, or def.
func envInt(name string, def int) int {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil || v <= 0 {
		return def
	}
	return v
}

// envString returns the environment variable name, or def when it is
// unset or empty.
func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envArgs splits an environment variable into flags.
func envArgs(name string) []string { return strings.Fields(os.Getenv(name)) }

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
