package fn

import (
	"encoding/json"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/proto"
)

// FuzzNamespacePolicy feeds RunFunction any namespace policy, for XWidgets of
// any size, keys and region, new or admitted. Whatever the policy holds, the
// call satisfies checkCall, a namespace policy never lets through what the
// Composition's policy refuses, and it never changes what is composed: it
// only decides whether it is.
func FuzzNamespacePolicy(f *testing.F) {
	for _, p := range []map[string]any{
		teamAPolicy(),
		teamBPolicy(),
		{"namespaceSelector": map[string]any{}, "rules": map[string]any{"allowedSizes": []any{"large"}, "maxKeys": 10}},
		{"namespaceSelector": map[string]any{}, "quotas": map[string]any{"widgets": 0, "keys": 0, "widgetsPerSize": map[string]any{"medium": 0}}},
		{"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "x", "operator": "Bogus"}}}},
		{"namespaceSelector": map[string]any{}, "rules": map[string]any{"allowedRegions": []any{"Moon"}, "maxKey": 1}},
		{"rules": "none"},
	} {
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "medium", int64(2), "", false)
		f.Add(b, "large", int64(5), "ap-south-1", true)
		f.Add(b, "small", int64(0), "us-east-1", true)
	}
	f.Add([]byte(`"a string"`), "small", int64(1), "", false)

	fn := newFuzzFunction(f)
	f.Fuzz(func(t *testing.T, policy []byte, size string, keys int64, region string, admitted bool) {
		var v any
		if err := json.Unmarshal(policy, &v); err != nil {
			t.Skip("not JSON")
		}
		mods := []mod{set("spec.size", size), set("spec.keys", keys)}
		if region != "" {
			mods = append(mods, set("spec.region", region))
		}
		var obs map[string]*fnv1.Resource
		if admitted {
			obs = map[string]*fnv1.Resource{"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil)}
		}
		nsA := namespaceObj("team-a", map[string]any{"widgetco.io/team": "team-a"})

		plain := testRequest{xr: nsXR(mods...), input: policyInput(), observed: obs}.build()
		plain.RequiredResources = fetched{namespace: nsA}.resources()
		withPolicy := proto.Clone(plain).(*fnv1.RunFunctionRequest)
		ec := policyEC("fuzzed", nil)
		ec["data"] = map[string]any{"widgetPolicy": v}
		withPolicy.RequiredResources = fetched{
			namespace: nsA,
			policies:  []map[string]any{ec},
			widgets:   []map[string]any{usedWidget("team-a", "api-1", "api", "medium", "", false)},
		}.resources()

		checkCall(t, fn, withPolicy)
		want, err := fn.RunFunction(t.Context(), plain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fn.RunFunction(t.Context(), withPolicy)
		if err != nil {
			t.Fatal(err)
		}
		if isFatal(want) && !isFatal(got) {
			t.Fatalf("the Composition's policy refuses the XWidget, but with namespace policy %s it is composed", policy)
		}
		if isFatal(got) {
			return
		}
		if !proto.Equal(want.GetDesired(), got.GetDesired()) {
			t.Errorf("namespace policy %s changed what is composed", policy)
		}
	})
}
