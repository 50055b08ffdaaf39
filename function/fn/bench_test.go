package fn

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// BenchmarkRunFunction measures one call for a namespaced XWidget that is new
// (nothing composed yet) and that is ready (the steady state every later
// reconcile sees) with a typical (3) and the largest (10, v1beta1.MaxKeys)
// number of access keys, and for a ready legacy XWidget. Besides ns/op,
// B/op and allocs/op it reports the median (ns-p50) and 99th percentile
// (ns-p99) of the duration of single calls.
func BenchmarkRunFunction(b *testing.B) {
	f, err := NewFunction()
	if err != nil {
		b.Fatalf("NewFunction(): %v", err)
	}
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			checkBenchResponse(b, f, bc.req, bc.desired)
			lat := newLatencies(1 << 16)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if _, err := f.RunFunction(context.Background(), bc.req); err != nil {
					b.Fatal(err)
				}
				lat.record(time.Since(start))
			}
			b.ReportMetric(float64(lat.quantile(0.50)), "ns-p50")
			b.ReportMetric(float64(lat.quantile(0.99)), "ns-p99")
		})
	}
}

// benchCase is a request BenchmarkRunFunction measures and how many
// resources its response must desire.
type benchCase struct {
	name    string
	req     *fnv1.RunFunctionRequest
	desired int
}

// benchCases are BenchmarkRunFunction's requests. A new XWidget's keys are
// composed with its Widget, so it desires as many resources as a ready one:
// the Widget, its keys and the connection Secret (the legacy XR has no
// connection Secret of its own).
func benchCases() []benchCase {
	return []benchCase{
		{"NamespacedNew3Keys", benchRequest(benchNamespaced, 3, false), 5},
		{"NamespacedReady3Keys", benchRequest(benchNamespaced, 3, true), 5},
		{"NamespacedReady10Keys", benchRequest(benchNamespaced, 10, true), 12},
		{"LegacyReady3Keys", benchRequest(benchLegacy, 3, true), 4},
	}
}

// TestBenchRequests runs each of BenchmarkRunFunction's requests once, as
// the benchmark checks it before measuring: make test runs no benchmark,
// and a request that no longer composes what the benchmark expects would
// otherwise be found only by the next benchmark run.
func TestBenchRequests(t *testing.T) {
	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	for _, bc := range benchCases() {
		t.Run(bc.name, func(t *testing.T) { checkBenchResponse(t, f, bc.req, bc.desired) })
	}
}

// checkBenchResponse fails the benchmark unless req composes want resources
// without a fatal result, and, for a ready XR, without any result: a ready
// request must be the steady state, in which no condition changes.
func checkBenchResponse(b testing.TB, f *Function, req *fnv1.RunFunctionRequest, want int) {
	b.Helper()
	rsp, err := f.RunFunction(context.Background(), req)
	if err != nil {
		b.Fatalf("RunFunction(): %v", err)
	}
	if got := len(rsp.GetDesired().GetResources()); got != want {
		b.Fatalf("RunFunction(): want %d desired resources, got %d", want, got)
	}
	steady := len(req.GetObserved().GetResources()) > 0
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL || steady {
			b.Fatalf("RunFunction(): unexpected %s result: %s", r.GetSeverity(), r.GetMessage())
		}
	}
}

// latencies keeps the durations of the last len(d) calls in a ring that is
// allocated up front, so that recording allocates nothing per call.
type latencies struct {
	d []time.Duration
	n int
}

func newLatencies(size int) *latencies { return &latencies{d: make([]time.Duration, size)} }

func (l *latencies) record(d time.Duration) {
	l.d[l.n%len(l.d)] = d
	l.n++
}

// quantile returns the q-quantile (0..1) of the recorded durations, by the
// nearest-rank method.
func (l *latencies) quantile(q float64) time.Duration {
	s := slices.Clone(l.d[:min(l.n, len(l.d))])
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

type benchFlavour int

const (
	benchNamespaced benchFlavour = iota
	benchLegacy
)

// benchRequest is a request for the namespaced XWidget team-a/web or the
// legacy XWidget web-5t2xq of the WidgetClaim team-b/web with the supplied
// number of access keys, under the examples' policy with maxKeys raised to
// allow them. When ready, the Widget, every WidgetKey and (for the
// namespaced XR) the connection Secret exist and are ready, and the XR has
// the conditions and status the function gave it: the steady state.
// Otherwise nothing is composed yet and the XR has no status. The desired
// state is empty, as Crossplane sends it to the first step of a pipeline.
func benchRequest(fl benchFlavour, keys int, ready bool) *fnv1.RunFunctionRequest {
	in := policyInput(set("rules.maxKeys", max(keys, 3)))
	// The XR, its widget's endpoint, external name and object name, and
	// who owns it.
	xr, endpoint, widget, mrName, owner := nsXR(set("spec.keys", keys)), nsEndpoint, "team-a-web-8k2mz", "web-8k2mz", "XWidget team-a/web"
	team := "team-a"
	if fl == benchLegacy {
		xr, endpoint, widget, mrName, owner = legacyXR(set("spec.keys", keys)), lgEndpoint, "web-5t2xq-h7kzp", "web-5t2xq-h7kzp", "WidgetClaim team-b/web"
		team = "team-b"
	}
	if !ready {
		return testRequest{xr: xr, input: in, desired: &fnv1.State{}}.build()
	}

	obs := map[string]*fnv1.Resource{}
	status := map[string]any{
		"endpoint":     endpoint,
		"externalName": widget,
		"widgetState":  "Ready",
		"keysReady":    fmt.Sprintf("%d/%d", keys, keys),
	}
	if fl == benchNamespaced {
		obs["widget"] = observed(nsWidget(widgetReady(endpoint)), nil)
		data := map[string]any{"endpoint": b64(endpoint), "widget": b64(widget)}
		for i := range keys {
			data[fmt.Sprintf("key-%d", i)] = b64(fmt.Sprintf("s3cr3t-%d", i))
			data[fmt.Sprintf("key-%d-name", i)] = b64(fmt.Sprintf("web-k%04d", i))
		}
		obs["connection-secret"] = observed(map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata": map[string]any{
				"name":        "web-connection",
				"namespace":   "team-a",
				"annotations": map[string]any{"crossplane.io/composition-resource-name": "connection-secret"},
			},
			"type": "Opaque",
			"data": data,
		}, nil)
		status["region"], status["connectionSecretName"] = "us-east-1", "web-connection"
	} else {
		obs["widget"] = observed(legacyWidget(), nil)
		status["region"] = "eu-west-1"
	}
	for i := range keys {
		name := fmt.Sprintf("web-k%04d", i)
		k := legacyKey
		if fl == benchNamespaced {
			k = func(mods ...mod) map[string]any { return nsKey(0, mods...) }
		}
		obs[string(keyResourceName(i))] = observed(
			k(set("metadata.name", name), set("metadata.annotations[crossplane.io/composition-resource-name]", string(keyResourceName(i)))),
			keyDetails(name, fmt.Sprintf("s3cr3t-%d", i), widget, endpoint))
	}

	xr = build(xr, set("status", status), conditions(
		xpCondition("Ready", "True", "Available", ""),
		xpCondition("Synced", "True", "ReconcileSuccess", ""),
		xpCondition("PolicyCompliant", "True", "Compliant", owner+" complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to "+team+"."),
		xpCondition("WidgetReady", "True", "Available", fmt.Sprintf("Widget %s is ready at %s.", mrName, endpoint)),
		xpCondition("KeysReady", "True", "Available", fmt.Sprintf("All %d access keys are ready.", keys)),
	))
	return testRequest{xr: xr, input: in, observed: obs, desired: &fnv1.State{}}.build()
}
