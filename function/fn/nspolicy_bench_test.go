package fn

import (
	"context"
	"fmt"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// BenchmarkRunFunctionNamespacePolicy measures one call for a ready
// namespaced XWidget with 3 keys: as BenchmarkRunFunction's
// NamespacedReady3Keys, but with the required resources Crossplane sends,
// without a namespace policy (NoPolicy: only the empty list of
// EnvironmentConfigs) and with one that has quotas, in a namespace of 100
// widgets with 3 keys each (Quotas100Widgets). It is the function's own cost
// of one call; Crossplane calls it twice (NoPolicy) or three times (with a
// policy) per reconcile (docs/policy.md).
func BenchmarkRunFunctionNamespacePolicy(b *testing.B) {
	f, err := NewFunction()
	if err != nil {
		b.Fatalf("NewFunction(): %v", err)
	}
	nsA := namespaceObj("team-a", map[string]any{"widgetco.io/team": "team-a"})
	none := benchRequest(benchNamespaced, 3, true)
	none.RequiredResources = fetched{}.resources()
	delete(none.RequiredResources, reqNamespace)

	quotas := benchRequest(benchNamespaced, 3, true)
	widgets := make([]map[string]any, 0, 100)
	keys := make([]map[string]any, 0, 300)
	widgets = append(widgets, usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-11-27T10:00:00Z", false))
	for i := range 99 {
		widgets = append(widgets, usedWidget("team-a", fmt.Sprintf("app-%03d-x", i), fmt.Sprintf("app-%03d", i), "small", "2026-11-27T10:00:01Z", false))
	}
	for i := range 300 {
		keys = append(keys, usedKey("team-a", fmt.Sprintf("key-%03d", i), false))
	}
	quotas.RequiredResources = fetched{
		namespace: nsA,
		policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{
			"widgets": 200, "keys": 1000, "widgetsPerSize": map[string]any{"medium": 50},
		}))},
		widgets: widgets,
		keys:    keys,
	}.resources()

	for _, bc := range []struct {
		name string
		req  *fnv1.RunFunctionRequest
	}{
		{"NoPolicy", none},
		{"Quotas100Widgets", quotas},
	} {
		b.Run(bc.name, func(b *testing.B) {
			checkBenchResponse(b, f, bc.req, 5)
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
