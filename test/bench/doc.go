//go:build linux

// Package bench measures function-widget and provider-widget and writes a
// report for docs/benchmarks.md. Everything lives in its tests, which skip
// unless WIDGET_BENCH=1, so `go test ./...` stays fast:
//
//	eval "$(bash hack/tools.sh env)"
//	WIDGET_BENCH=1 go test -count=1 -timeout 30m -run TestBenchmarks -v ./test/bench/
//
// Environment: WIDGET_BENCH_N (Widgets in each provider creation run, default 1000),
// WIDGET_BENCH_PROVIDER_RUNS (repeats of the provider creation run with
// the default flags, default 3), WIDGET_BENCH_SWEEP (the provider flag sets
// to compare, ';'-separated, default ";--max-reconcile-rate=10;--max-reconcile-rate=100"),
// WIDGET_BENCH_STEADY_N and WIDGET_BENCH_STEADY_POLL_SECONDS (Widgets and
// poll interval of the steady-state run, default 200 and 20),
// WIDGET_BENCH_STEADY_COUNTS (the Widget counts of the steady-state-at-scale
// section, comma-separated, default "10000,20000"), WIDGET_BENCH_STEADY_WINDOW_SECONDS
// (its window at the default poll interval, default 600),
// WIDGET_BENCH_STEADY_DRIFT_MS (one out-of-band change this often in the
// window, default 1000), WIDGET_BENCH_STEADY_SETTLE_SECONDS (the wait
// between all Ready and the window, default 60),
// WIDGET_BENCH_IMPORT_N (Widgets of the Observe-only import, default 10000),
// WIDGET_BENCH_FOREIGN_SECRETS (Secrets of 1 KiB that are not the
// provider's, created before the provider runs, default 0),
// WIDGET_BENCH_PPROF=1 (the provider serves pprof; a heap profile of each
// run goes to _output/bench/heap-<run>.pb.gz),
// WIDGET_BENCH_PROVIDER_BASELINE (another provider binary that runs right
// before each run of the first flag set, and of each count of the steady
// section, for before/after tables),
// WIDGET_BENCH_RUNS (repeats of the drift section, default 1),
// WIDGET_BENCH_CALLS (gRPC calls per function, scenario and round, default 1000),
// WIDGET_BENCH_PROVIDER_ARGS (extra provider flags, space separated),
// WIDGET_BENCH_DRIFT_N (Widgets and out-of-band changes per phase in the
// drift section, default 100), WIDGET_BENCH_DRIFT_POLL_SECONDS (its
// polling-only poll interval and the span its changes are spread over,
// default 30),
// WIDGET_BENCH_DRIFT_FLOOR=0 (skip the drift section's minimal-repairer
// burst, which shows what the machine allows without the provider),
// WIDGET_BENCH_E2E_N (claims in the end-to-end section, default 100),
// WIDGET_BENCH_E2E_MIX=half (half of them namespaced XWidgets, default: claims only),
// WIDGET_BENCH_E2E_VARIANTS (how the claims are composed, comma-separated:
// widget, function-widget; pt, function-patch-and-transform v0.5.0 then
// function-auto-ready v0.6.0, test/bench/testdata/pt-composition.yaml, which
// needs `bash hack/tools.sh function-patch-and-transform function-auto-ready`;
// base, function-widget from the package WIDGET_BENCH_E2E_BASE_FUNCTION names
// (a .xpkg of another build, for before/after in one run);
// each variant on its own fresh control plane, back to back, order rotated
// each run; default widget),
// WIDGET_BENCH_E2E_NAME_COMPOSITION=0 (function-widget's claims take the
// XRD's default Composition; by default every variant's claims name theirs
// in spec.compositionRef, as the peer's must),
// WIDGET_BENCH_E2E_RUNS (its repeats, each on a fresh control plane,
// default 1), WIDGET_BENCH_E2E_STEADY_SECONDS (its steady-state window
// after all claims are Ready, default 60), WIDGET_BENCH_E2E_CORE_ARGS and
// WIDGET_BENCH_E2E_PROVIDER_ARGS (extra flags for Crossplane core and
// provider-widget there, space separated),
// WIDGET_BENCH_ROTATION_N, WIDGET_BENCH_ROTATION_LIMIT and
// WIDGET_BENCH_ROTATION_RUNS (WidgetKeys rotated at once, the Widget API's
// requests per second per token, and repeats of the key rotation section;
// default 1000, 100 and 3),
// WIDGET_BENCH_FAILOVER_RUNS (container kills and pod deletions of the
// provider's leader each, default 5), WIDGET_BENCH_NODELOSS_CLAIMS (claims
// Ready before a node of a two-node cluster is lost, and created at once
// after, default 10),
// WIDGET_BENCH_ONLY (comma-separated sections to run),
// WIDGET_BENCH_LOGS (a directory that keeps the provider logs),
// WIDGET_BENCH_SETTLE_SECONDS (how long after all Widgets of a provider
// creation run are Ready its RSS is measured again, default 0: not),
// WIDGET_BENCH_OUT (the report, default _output/bench/benchmarks.md; the
// curated docs/benchmarks.md is never written by a run).
package bench
