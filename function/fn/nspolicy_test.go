package fn

import (
	"maps"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Namespace admission is package internal/nspolicy. Its behaviour is tested
// here, in quota_test.go, admission_test.go and nspolicy_{bench,fuzz}_test.go
// through RunFunction: what the XR and its claim see, and what the function
// requires of Crossplane.

// Builders of the resources Crossplane fetches for the function's
// requirements, written the way the API server returns them.

// teamNamespace is a Namespace with labels.
func namespaceObj(name string, labels map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata":   map[string]any{"name": name, "labels": labels},
	}
}

// policyEC is an EnvironmentConfig that holds a namespace policy.
func policyEC(name string, policy any) map[string]any {
	o := map[string]any{
		"apiVersion": "apiextensions.crossplane.io/v1beta1",
		"kind":       "EnvironmentConfig",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"fn.widgetco.io/widget-policy": "true"}},
	}
	if policy != nil {
		o["data"] = map[string]any{"widgetPolicy": policy}
	}
	return o
}

// forTeam is a namespace selector of the label widgetco.io/team.
func forTeam(team string) map[string]any {
	return map[string]any{"matchLabels": map[string]any{"widgetco.io/team": team}}
}

// usedWidget is a Widget that counts towards a namespace's quota: a
// namespaced one of XWidget owner, or, with legacy, a cluster-scoped one of
// WidgetClaim owner.
func usedWidget(ns, name, owner, size, created string, legacy bool) map[string]any {
	md := map[string]any{"name": name, "labels": map[string]any{"fn.widgetco.io/component": "widget", "crossplane.io/composite": owner}}
	o := map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "Widget",
		"metadata":   md,
		"spec":       map[string]any{"forProvider": map[string]any{"size": size}},
	}
	if created != "" {
		md["creationTimestamp"] = created
	}
	if legacy {
		o["apiVersion"] = "widget.widgetco.io/v1beta1"
		md["labels"] = map[string]any{"fn.widgetco.io/component": "widget", "crossplane.io/composite": owner + "-x7k2p", "crossplane.io/claim-name": owner, "crossplane.io/claim-namespace": ns}
		return o
	}
	md["namespace"] = ns
	return o
}

// usedKey is a WidgetKey that counts towards a namespace's quota.
func usedKey(ns, name string, legacy bool) map[string]any {
	if legacy {
		return map[string]any{
			"apiVersion": "widget.widgetco.io/v1beta1",
			"kind":       "WidgetKey",
			"metadata":   map[string]any{"name": name, "labels": map[string]any{"crossplane.io/claim-namespace": ns}},
		}
	}
	return map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "WidgetKey",
		"metadata":   map[string]any{"name": name, "namespace": ns},
	}
}

// The names of the function's requirements (internal/nspolicy).
const (
	reqNamespace     = "widget-policy-namespace"
	reqPolicies      = "widget-policy-environmentconfigs"
	reqWidgets       = "widget-quota-widgets"
	reqLegacyWidgets = "widget-quota-legacy-widgets"
	reqKeys          = "widget-quota-keys"
	reqLegacyKeys    = "widget-quota-legacy-keys"
	reqQueue         = "widget-quota-xwidgets"
)

// fetched is what Crossplane sends for the function's requirements. Every
// requirement is present, as Crossplane sends it even when nothing matched.
type fetched struct {
	namespace     map[string]any
	policies      []map[string]any
	widgets       []map[string]any
	legacyWidgets []map[string]any
	keys          []map[string]any
	legacyKeys    []map[string]any
	// xwidgets are the XRs of the calling XR's kind in its namespace.
	xwidgets []map[string]any
}

func (f fetched) resources() map[string]*fnv1.Resources {
	list := func(os ...map[string]any) *fnv1.Resources {
		rs := &fnv1.Resources{}
		for _, o := range os {
			if o != nil {
				rs.Items = append(rs.Items, &fnv1.Resource{Resource: resource.MustStructObject(&unstructured.Unstructured{Object: o})})
			}
		}
		return rs
	}
	return map[string]*fnv1.Resources{
		reqNamespace:     list(f.namespace),
		reqPolicies:      list(f.policies...),
		reqWidgets:       list(f.widgets...),
		reqLegacyWidgets: list(f.legacyWidgets...),
		reqKeys:          list(f.keys...),
		reqLegacyKeys:    list(f.legacyKeys...),
		reqQueue:         list(f.xwidgets...),
	}
}

func TestTeamRequirements(t *testing.T) {
	ns := func(s string) *string { return &s }
	labels := func(kv ...string) *fnv1.ResourceSelector_MatchLabels {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: m}}
	}
	policiesOnly := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"widget-policy-environmentconfigs": {ApiVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Match: labels("fn.widgetco.io/widget-policy", "true")},
	}}
	teamB := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"widget-policy-environmentconfigs": {ApiVersion: "apiextensions.crossplane.io/v1beta1", Kind: "EnvironmentConfig", Match: labels("fn.widgetco.io/widget-policy", "true")},
		"widget-policy-namespace":          {ApiVersion: "v1", Kind: "Namespace", Match: &fnv1.ResourceSelector_MatchName{MatchName: "team-b"}},
		"widget-quota-widgets":             {ApiVersion: "widget.m.widgetco.io/v1beta1", Kind: "Widget", Namespace: ns("team-b"), Match: labels("fn.widgetco.io/component", "widget")},
		"widget-quota-legacy-widgets":      {ApiVersion: "widget.widgetco.io/v1beta1", Kind: "Widget", Match: labels("fn.widgetco.io/component", "widget", "crossplane.io/claim-namespace", "team-b")},
		"widget-quota-keys":                {ApiVersion: "widget.m.widgetco.io/v1beta1", Kind: "WidgetKey", Namespace: ns("team-b")},
		"widget-quota-legacy-keys":         {ApiVersion: "widget.widgetco.io/v1beta1", Kind: "WidgetKey", Match: labels("crossplane.io/claim-namespace", "team-b")},
		"widget-quota-xwidgets":            {ApiVersion: "platform.widgetco.io/v1alpha1", Kind: "XWidget", Namespace: ns("team-b")},
	}}
	// What a claim's XR asks for: its own kind's XRs of its claim's
	// namespace.
	claimB := &fnv1.Requirements{Resources: maps.Clone(teamB.GetResources())}
	claimB.Resources[reqQueue] = &fnv1.ResourceSelector{ApiVersion: "legacy.platform.widgetco.io/v1alpha1", Kind: "XWidget", Match: labels("crossplane.io/claim-namespace", "team-b")}
	// What a new XR asks for where only a widget quota applies: no keys.
	widgetQuotaB := &fnv1.Requirements{Resources: maps.Clone(teamB.GetResources())}
	delete(widgetQuotaB.Resources, reqKeys)
	delete(widgetQuotaB.Resources, reqLegacyKeys)
	policyB := []map[string]any{policyEC("team-b", map[string]any{"namespaceSelector": forTeam("team-b")})}
	quotaB := []map[string]any{policyEC("team-b", map[string]any{"namespaceSelector": forTeam("team-b"), "quotas": map[string]any{"keys": 10}})}
	teamBNoUsage := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"widget-policy-environmentconfigs": teamB.GetResources()[reqPolicies],
		"widget-policy-namespace":          teamB.GetResources()[reqNamespace],
	}}
	labelsB := map[string]any{"widgetco.io/team": "team-b"}
	// withFetched returns a request for XR xr with the required resources
	// of the supplied names.
	withFetched := func(xr map[string]any, f fetched, names ...string) func() *fnv1.RunFunctionRequest {
		return func() *fnv1.RunFunctionRequest {
			req := testRequest{xr: xr, input: policyInput()}.build()
			all := f.resources()
			req.RequiredResources = map[string]*fnv1.Resources{}
			for _, n := range names {
				req.RequiredResources[n] = all[n]
			}
			return req
		}
	}
	every := []string{reqPolicies, reqNamespace, reqWidgets, reqLegacyWidgets, reqKeys, reqLegacyKeys, reqQueue}

	// An admitted XWidget team-a/web without keys whose Widget became Ready
	// a minute after it was created, and which complies with team-a's
	// policy, as a call that counted the namespace's usage found.
	teamA := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"widget-policy-environmentconfigs": teamB.GetResources()[reqPolicies],
		"widget-policy-namespace":          {ApiVersion: "v1", Kind: "Namespace", Match: &fnv1.ResourceSelector_MatchName{MatchName: "team-a"}},
	}}
	// An admitted XR of team-a, whose policy sets a widget quota only,
	// asks for the namespace's Widgets, not its keys nor its XRs.
	teamAUsage := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"widget-policy-environmentconfigs": teamB.GetResources()[reqPolicies],
		"widget-policy-namespace":          teamA.GetResources()[reqNamespace],
		"widget-quota-widgets":             {ApiVersion: "widget.m.widgetco.io/v1beta1", Kind: "Widget", Namespace: ns("team-a"), Match: labels("fn.widgetco.io/component", "widget")},
		"widget-quota-legacy-widgets":      {ApiVersion: "widget.widgetco.io/v1beta1", Kind: "Widget", Match: labels("fn.widgetco.io/component", "widget", "crossplane.io/claim-namespace", "team-a")},
	}}
	// Before it knows the limits, it asks for what a widget and a key
	// quota need at once.
	teamAGuess := &fnv1.Requirements{Resources: maps.Clone(teamAUsage.GetResources())}
	teamAGuess.Resources[reqKeys] = &fnv1.ResourceSelector{ApiVersion: "widget.m.widgetco.io/v1beta1", Kind: "WidgetKey", Namespace: ns("team-a")}
	teamAGuess.Resources[reqLegacyKeys] = &fnv1.ResourceSelector{ApiVersion: "widget.widgetco.io/v1beta1", Kind: "WidgetKey", Match: labels("crossplane.io/claim-namespace", "team-a")}
	compliantA := "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 5 widgets in all."
	settledXR := func(msg string, mods ...mod) map[string]any {
		return nsXR(append([]mod{set("spec.keys", 0), conditions(xpCondition("PolicyCompliant", "True", "Compliant", msg))}, mods...)...)
	}
	readyAt := func(at string) mod {
		return func(o map[string]any) {
			widgetReady(nsEndpoint)(o)
			set("metadata.creationTimestamp", "2026-01-01T00:00:00Z")(o)
			conditions(map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": at})(o)
		}
	}
	fetchedA := fetched{
		namespace: namespaceObj("team-a", map[string]any{"widgetco.io/team": "team-a"}),
		policies:  []map[string]any{policyEC("team-a", teamAPolicy())},
		widgets:   []map[string]any{usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-01-01T00:00:00Z", false)},
	}
	withObserved := func(build func() *fnv1.RunFunctionRequest, widget map[string]any) func() *fnv1.RunFunctionRequest {
		return func() *fnv1.RunFunctionRequest {
			req := build()
			req.Observed.Resources = map[string]*fnv1.Resource{"widget": observed(widget, nil)}
			return req
		}
	}

	cases := map[string]struct {
		reason string
		req    func() *fnv1.RunFunctionRequest
		want   *fnv1.Requirements
	}{
		"FirstCall": {
			reason: "The first call asks for the namespace policies only.",
			req: func() *fnv1.RunFunctionRequest {
				return testRequest{xr: nsXR(set("metadata.namespace", "team-b")), input: policyInput()}.build()
			},
			want: policiesOnly,
		},
		"NoPolicies": {
			reason: "Without namespace policies the function asks for the same again, so Crossplane stops: no Namespace is read, no usage is listed.",
			req:    withFetched(nsXR(set("metadata.namespace", "team-b")), fetched{}, reqPolicies),
			want:   policiesOnly,
		},
		"PoliciesExist": {
			reason: "Once a namespace policy exists, the function asks for its namespace and the namespace's widgets and keys of both scopes.",
			req:    withFetched(nsXR(set("metadata.namespace", "team-b")), fetched{policies: policyB}, reqPolicies),
			want:   teamB,
		},
		"WidgetQuotaOnly": {
			reason: "Where no key quota applies the function does not ask for the namespace's WidgetKeys, most of what a namespace has: a new XR asks for its Widgets and its XRs.",
			req: withFetched(nsXR(set("metadata.namespace", "team-b")), fetched{
				namespace: namespaceObj("team-b", labelsB),
				policies:  []map[string]any{policyEC("team-b", map[string]any{"namespaceSelector": forTeam("team-b"), "quotas": map[string]any{"widgets": 1}})},
			}, every...),
			want: widgetQuotaB,
		},
		"EverythingFetched": {
			reason: "With what it asked for, the function asks for exactly the same again: Crossplane stops calling once the requirements are equal.",
			req: withFetched(nsXR(set("metadata.namespace", "team-b")), fetched{
				namespace: namespaceObj("team-b", labelsB),
				policies:  quotaB,
				widgets:   []map[string]any{usedWidget("team-b", "api-1", "api", "small", "", false)},
			}, every...),
			want: teamB,
		},
		"NoQuota": {
			reason: "Where no quota applies (a policy with rules only, or another namespace's quota) the namespace's usage cannot change the verdict: the function stops asking for it, so core does not reconcile the XR at every change to another widget of its namespace.",
			req: withFetched(nsXR(set("metadata.namespace", "team-b")), fetched{
				namespace: namespaceObj("team-b", labelsB),
				policies:  []map[string]any{policyB[0], policyEC("team-a", teamAPolicy())},
				widgets:   []map[string]any{usedWidget("team-b", "api-1", "api", "small", "", false)},
			}, every...),
			want: teamBNoUsage,
		},
		"NoQuotaSeeded": {
			reason: "Seeded with what it asked for last reconcile, an XR no quota applies to asks for the same: one call.",
			req: withFetched(nsXR(set("metadata.namespace", "team-b")), fetched{
				namespace: namespaceObj("team-b", labelsB),
				policies:  []map[string]any{policyB[0], policyEC("team-a", teamAPolicy())},
			}, reqPolicies, reqNamespace),
			want: teamBNoUsage,
		},
		"ClaimOfTeamB": {
			reason: "A claim's XR asks for its claim's namespace: the claim counts towards the same quotas as the namespace's XWidgets.",
			req:    withFetched(legacyXR(), fetched{policies: policyB}, reqPolicies),
			want:   claimB,
		},
		"SettledNeedsNoUsage": {
			reason: "An admitted XWidget that does not grow, whose Widget became Ready after its creation second and that already complies with these limits, no longer asks for its namespace's usage: another widget's change cannot change its verdict.",
			req:    withObserved(withFetched(settledXR(compliantA), fetchedA, every...), nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want:   teamA,
		},
		"SettledSeeded": {
			reason: "Seeded with what it asked for last reconcile (no usage), a settled XWidget asks for the same: one call.",
			req:    withObserved(withFetched(settledXR(compliantA), fetchedA, reqPolicies, reqNamespace), nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want:   teamA,
		},
		"NotYetCounted": {
			reason: "Before its Namespace is fetched, the function cannot tell whether the XWidget is settled: it asks for the Namespace and the usage at once.",
			req:    withObserved(withFetched(settledXR(compliantA), fetchedA, reqPolicies), nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want:   teamAGuess,
		},
		"ReadyInItsCreationSecond": {
			reason: "A Widget Ready in the second it was created may be ordered after a widget created in that second that the call did not count: the XWidget keeps counting.",
			req:    withObserved(withFetched(settledXR(compliantA), fetchedA, every...), nsWidget(readyAt("2026-01-01T00:00:00Z"))),
			want:   teamAUsage,
		},
		"NotReady": {
			reason: "An XWidget whose Widget is not Ready yet keeps counting: its verdict may still change with a racing XWidget's.",
			req:    withObserved(withFetched(settledXR(compliantA), fetchedA, every...), nsWidget()),
			want:   teamAUsage,
		},
		"CompliedProvisionally": {
			reason: "A Compliant condition written before the Widget was Ready is provisional: a racing XWidget's Widget may not have been counted then, so the XWidget counts again once.",
			req: withObserved(withFetched(settledXR(compliantA+" Its place in the namespace's quotas is provisional until its widget is ready."), fetchedA, every...),
				nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want: teamAUsage,
		},
		"PolicyChanged": {
			reason: "A condition other than the one the current limits give (the policy or the namespace's labels changed) makes the XWidget count again.",
			req:    withObserved(withFetched(settledXR(strings.Replace(compliantA, "5 widgets", "6 widgets", 1)), fetchedA, every...), nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want:   teamAUsage,
		},
		"OverLimit": {
			reason: "An XWidget reported over a limit keeps counting, so that it complies again once the namespace is within its quotas.",
			req: withObserved(withFetched(nsXR(set("spec.keys", 0), conditions(xpCondition("PolicyCompliant", "False", "AdmittedOverLimit", compliantA))), fetchedA, every...),
				nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want: teamAUsage,
		},
		"Grows": {
			reason: "An XWidget that asks for more keys than it has is checked against the key quota: it counts.",
			req:    withObserved(withFetched(settledXR(compliantA, set("spec.keys", 1)), fetchedA, every...), nsWidget(readyAt("2026-01-01T00:01:00Z"))),
			want:   teamAUsage,
		},
		"LegacyWithoutClaim": {
			reason: "A legacy XR without a claim belongs to no namespace: only the Composition's policy applies and nothing is asked for.",
			req: func() *fnv1.RunFunctionRequest {
				return testRequest{xr: legacyXR(unset("spec.claimRef")), input: policyInput()}.build()
			},
		},
	}
	f, err := NewFunction()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := f.RunFunction(t.Context(), tc.req())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rsp.GetRequirements(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nrequirements: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
