// Package bench measures function-widget and provider-widget and writes
// docs/benchmarks.md (issue 7). Everything lives in its tests, which skip
// unless WIDGET_BENCH=1, so `go test ./...` stays fast:
//
//	eval "$(bash hack/tools.sh env)"
//	WIDGET_BENCH=1 go test -count=1 -timeout 30m -run TestBenchmarks -v ./test/bench/
//
// Environment: WIDGET_BENCH_N (Widgets in the provider run, default 200),
// WIDGET_BENCH_RUNS (repeats of the provider run, default 1),
// WIDGET_BENCH_CALLS (gRPC calls per function and scenario, default 2000),
// WIDGET_BENCH_PROVIDER_ARGS (extra provider flags, space separated),
// WIDGET_BENCH_DRIFT_N (Widgets and out-of-band changes per phase in the
// drift section, default 100), WIDGET_BENCH_DRIFT_POLL_SECONDS (its
// polling-only poll interval and the span its changes are spread over,
// default 30; WIDGET_BENCH_RUNS repeats it too),
// WIDGET_BENCH_ONLY (comma-separated sections to run; the document then
// goes to _output/bench/ unless WIDGET_BENCH_OUT is set),
// WIDGET_BENCH_LOGS (a directory that keeps the provider logs),
// WIDGET_BENCH_OUT (the document, default docs/benchmarks.md).
package bench
