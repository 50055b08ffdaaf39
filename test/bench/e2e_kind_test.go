//go:build linux

package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
)

// An e2eKind is a kind of object that app teams create in the end-to-end
// run: the legacy WidgetClaim or the namespaced v2 XWidget. It says how the
// run makes its objects, follows them to Ready and tells their work apart
// in the counters.
type e2eKind struct {
	name    string // the kind, as the report names it
	noun    string // its objects in the report's sentences: one,
	many    string // several
	one     string // and one of them with its article
	prefix  string // of its objects' names
	example string // the object, under examples/composition
	gvk     schema.GroupVersionKind
	// final is the stage at which an object is Ready; stages are all its
	// stages in order, path the ones that follow one another (as
	// e2ePath), lost the Ready stages whose losses the report counts.
	final              string
	stages, path, lost []string
	// watches follow its objects through their stages into tl.
	watches func(tl *timeline) []stageWatch
	// Its work in the counters: function-widget counts its XRs' calls by
	// flavour, the names of core's controllers for it end with its XRD's,
	// and the kube-apiserver counts requests by API group: of it, its XR
	// and its managed resources (the last one).
	flavour string
	xrd     string
	groups  []string
	// Set for a run by e2eEnv.kinds: newObject makes the object ns/name,
	// which has keys WidgetKeys.
	newObject func(ns, name string) *unstructured.Unstructured
	keys      int
}

var (
	kindClaim = &e2eKind{
		name: "WidgetClaim", noun: "claim", many: "claims", one: "a claim",
		prefix: "c-", example: "legacy/claim.yaml", gvk: gvkClaim, watches: claimWatches,
		final: stReady, stages: e2eStages, path: e2ePath,
		lost:    []string{stReady, stXRReady, stWidgetReady, stKeyReady},
		flavour: "Legacy", xrd: "xwidgets.legacy.platform.widgetco.io", groups: []string{gvkClaim.Group, gvkWidget.Group},
	}
	kindXWidget = &e2eKind{
		name: "XWidget", noun: "XWidget", many: "XWidgets", one: "an XWidget",
		prefix: "x-", example: "namespaced/xr.yaml", gvk: gvkXWidget, watches: xwidgetWatches,
		final:   stXWidgetReady,
		stages:  []string{stWidget, stWidgetReady, stKey, stKeyReady, stXWidgetReady},
		path:    []string{stWidget, stWidgetReady, stKey, stXWidgetReady},
		lost:    []string{stXWidgetReady, stWidgetReady, stKeyReady},
		flavour: "Namespaced", xrd: "xwidgets.platform.widgetco.io", groups: []string{gvkXWidget.Group, gvkWidgetM.Group},
	}
)

// e2eMix is the kinds the run creates, from WIDGET_BENCH_E2E_MIX: claims
// only ("" or "legacy"), or claims and XWidgets in turn ("half").
func e2eMix(t *testing.T) []*e2eKind {
	t.Helper()
	switch m := os.Getenv("WIDGET_BENCH_E2E_MIX"); m {
	case "", "legacy":
		return []*e2eKind{kindClaim}
	case "half":
		return []*e2eKind{kindClaim, kindXWidget}
	default:
		t.Fatalf("WIDGET_BENCH_E2E_MIX=%q: want legacy or half", m)
		return nil
	}
}

// kindOf is the kind of the object name among ks, or nil.
func kindOf(ks []*e2eKind, name string) *e2eKind {
	for _, k := range ks {
		if strings.HasPrefix(name, k.prefix) {
			return k
		}
	}
	return nil
}

// A stageWatch watches the objects of a kind (in ns, or all) and records
// their stages.
type stageWatch struct {
	gvk schema.GroupVersionKind
	ns  string
	see func(u *unstructured.Unstructured)
}

// claimWatches follow claims: the claims, their XRs and the cluster-scoped
// managed resources composed for them, which carry the claim's name in a
// label.
func claimWatches(tl *timeline) []stageWatch {
	byClaim := func(stage string, ready bool) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			l := u.GetLabels()
			if l["crossplane.io/claim-namespace"] != e2eNamespace {
				return
			}
			tl.set(l["crossplane.io/claim-name"], u.GetName(), stage, !ready || condTrue(u, "Ready"))
		}
	}
	return []stageWatch{
		{gvkClaim, e2eNamespace, func(u *unstructured.Unstructured) {
			tl.set(u.GetName(), u.GetName(), stReady, claimReady(u))
		}},
		{gvkLegacyXR, "", func(u *unstructured.Unstructured) {
			byClaim(stXR, false)(u)
			byClaim(stXRReady, true)(u)
		}},
		{gvkWidget, "", func(u *unstructured.Unstructured) {
			byClaim(stWidget, false)(u)
			byClaim(stWidgetReady, true)(u)
		}},
		{gvkWidgetKey, "", func(u *unstructured.Unstructured) {
			byClaim(stKey, false)(u)
			byClaim(stKeyReady, true)(u)
		}},
	}
}

// xwidgetWatches follow namespaced XWidgets: the XRs and the managed
// resources composed for them in their namespace, which carry the XR's
// name in a label.
func xwidgetWatches(tl *timeline) []stageWatch {
	byXR := func(stage string, ready bool) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			tl.set(u.GetLabels()["crossplane.io/composite"], u.GetName(), stage, !ready || condTrue(u, "Ready"))
		}
	}
	return []stageWatch{
		{gvkXWidget, e2eNamespace, func(u *unstructured.Unstructured) {
			tl.set(u.GetName(), u.GetName(), stXWidgetReady, claimReady(u))
		}},
		{gvkWidgetM, e2eNamespace, func(u *unstructured.Unstructured) {
			byXR(stWidget, false)(u)
			byXR(stWidgetReady, true)(u)
		}},
		{gvkWidgetKeyM, e2eNamespace, func(u *unstructured.Unstructured) {
			byXR(stKey, false)(u)
			byXR(stKeyReady, true)(u)
		}},
	}
}

// kinds returns the run's kinds: copies of mix that make their objects.
func (e *e2eEnv) kinds(t *testing.T, mix []*e2eKind) []*e2eKind {
	t.Helper()
	ks := make([]*e2eKind, 0, len(mix))
	for _, k := range mix {
		c := *k
		c.newObject, c.keys = e.exampleMaker(t, k.example)
		if k.gvk == gvkClaim {
			c.newObject = e.variant.selectComposition(c.newObject)
		}
		ks = append(ks, &c)
	}
	return ks
}

// exampleMaker returns a function that makes the object ns/name:
// examples/composition/<example> renamed, with its own connection Secret
// when the example names one; and the WidgetKeys the example asks for.
func (e *e2eEnv) exampleMaker(t *testing.T, example string) (func(ns, name string) *unstructured.Unstructured, int) {
	t.Helper()
	path := filepath.Join("examples", "composition", example)
	objs, err := platform.ReadObjects(filepath.Join(e.root, path))
	if err != nil || len(objs) != 1 {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	_, secret, _ := unstructured.NestedString(objs[0].Object, "spec", "writeConnectionSecretToRef", "name")
	return func(ns, name string) *unstructured.Unstructured {
		u := objs[0].DeepCopy()
		u.SetNamespace(ns)
		u.SetName(name)
		if secret {
			_ = unstructured.SetNestedField(u.Object, name+"-widget", "spec", "writeConnectionSecretToRef", "name")
		}
		return u
	}, exampleKeys(objs[0])
}

// exampleKeys is the WidgetKeys an example asks for: its spec.keys (a
// float64 when decoded from YAML), or else the Compositions' default, one.
func exampleKeys(u *unstructured.Unstructured) int {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "keys")
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	default:
		return 1
	}
}

// runFunctionCalls is the RunFunction calls function-widget handled for
// its XRs in the counters of d (as are the figures of the methods below).
func (k *e2eKind) runFunctionCalls(d metricDelta) float64 {
	return d.sum("function_widget_compositions_total", `flavour="`+k.flavour+`"`)
}

// xrEvents is the watch events core's circuit breaker handled for its XRs,
// those with result when result is not "".
func (k *e2eKind) xrEvents(d metricDelta, result string) float64 {
	match := []string{`controller="composite/` + k.xrd + `"`}
	if result != "" {
		match = append(match, `result="`+result+`"`)
	}
	return d.sum("circuit_breaker_events_total", match...)
}

// breakerOpens is how often core's circuit breaker opened for one of its
// XRs.
func (k *e2eKind) breakerOpens(d metricDelta) float64 {
	return d.sum("circuit_breaker_opens_total", `controller="composite/`+k.xrd+`"`)
}

// coreReconciles is the reconciles of core's controllers for it: of its
// XRs and, for claims, of the claims.
func (k *e2eKind) coreReconciles(d metricDelta) float64 {
	n := 0.0
	for c, v := range d.by("controller_runtime_reconcile_total", "controller") {
		if strings.HasSuffix(c, "/"+k.xrd) {
			n += v
		}
	}
	return n
}

// providerReconciles is the reconciles of the provider's controllers of
// its managed resources.
func (k *e2eKind) providerReconciles(d metricDelta) float64 {
	n := 0.0
	for c, v := range d.by("controller_runtime_reconcile_total", "controller") {
		if strings.HasPrefix(c, "managed/") && strings.HasSuffix(c, "."+k.groups[len(k.groups)-1]) {
			n += v
		}
	}
	return n
}

// apiRequests is the kube-apiserver's requests to its API groups, from all
// clients.
func (k *e2eKind) apiRequests(d metricDelta) float64 {
	n := 0.0
	for g, v := range d.by("apiserver_request_total", "group") {
		if slices.Contains(k.groups, g) {
			n += v
		}
	}
	return n
}

// TestKindCounters checks that the e2e section tells each kind's work apart
// in the counters (it runs without WIDGET_BENCH).
func TestKindCounters(t *testing.T) {
	ss, err := prom.Parse(strings.NewReader(`
function_widget_compositions_total{flavour="Legacy",outcome="Ready"} 4
function_widget_compositions_total{flavour="Legacy",outcome="Converging"} 2
function_widget_compositions_total{flavour="Namespaced",outcome="Ready"} 3
circuit_breaker_events_total{controller="composite/xwidgets.legacy.platform.widgetco.io",result="Allowed"} 10
circuit_breaker_events_total{controller="composite/xwidgets.platform.widgetco.io",result="Allowed"} 7
circuit_breaker_events_total{controller="composite/xwidgets.platform.widgetco.io",result="Dropped"} 1
circuit_breaker_opens_total{controller="composite/xwidgets.platform.widgetco.io"} 1
controller_runtime_reconcile_total{controller="claim/xwidgets.legacy.platform.widgetco.io",result="success"} 5
controller_runtime_reconcile_total{controller="composite/xwidgets.legacy.platform.widgetco.io",result="success"} 3
controller_runtime_reconcile_total{controller="composite/xwidgets.platform.widgetco.io",result="success"} 2
controller_runtime_reconcile_total{controller="managed/widget.widget.widgetco.io",result="success"} 6
controller_runtime_reconcile_total{controller="managed/widgetkey.widget.m.widgetco.io",result="success"} 4
controller_runtime_reconcile_total{controller="providerconfig/providerconfig.widget.widgetco.io",result="success"} 9
apiserver_request_total{code="200",group="legacy.platform.widgetco.io",resource="widgetclaims",verb="PUT"} 8
apiserver_request_total{code="200",group="widget.widgetco.io",resource="widgets",verb="APPLY"} 2
apiserver_request_total{code="200",group="platform.widgetco.io",resource="xwidgets",verb="APPLY"} 5
apiserver_request_total{code="200",group="",resource="secrets",verb="GET"} 20
`))
	if err != nil {
		t.Fatal(err)
	}
	d := metricDelta{before: map[string]float64{}, after: ss.Series()}
	cases := map[string]struct {
		reason string
		count  func(k *e2eKind) float64
		want   map[string]float64
	}{
		"RunFunctionCalls": {
			reason: "function-widget counts its calls by the flavour of the XR",
			count:  func(k *e2eKind) float64 { return k.runFunctionCalls(d) },
			want:   map[string]float64{"WidgetClaim": 6, "XWidget": 3},
		},
		"XREvents": {
			reason: "core's circuit breaker counts watch events by the XR's controller",
			count:  func(k *e2eKind) float64 { return k.xrEvents(d, "") },
			want:   map[string]float64{"WidgetClaim": 10, "XWidget": 8},
		},
		"DroppedXREvents": {
			reason: "a result narrows the watch events down",
			count:  func(k *e2eKind) float64 { return k.xrEvents(d, "Dropped") },
			want:   map[string]float64{"WidgetClaim": 0, "XWidget": 1},
		},
		"BreakerOpens": {
			reason: "core's circuit breaker counts its openings by the XR's controller",
			count:  func(k *e2eKind) float64 { return k.breakerOpens(d) },
			want:   map[string]float64{"WidgetClaim": 0, "XWidget": 1},
		},
		"CoreReconciles": {
			reason: "a claim's reconciles are its claim controller's and its composite controller's",
			count:  func(k *e2eKind) float64 { return k.coreReconciles(d) },
			want:   map[string]float64{"WidgetClaim": 8, "XWidget": 2},
		},
		"ProviderReconciles": {
			reason: "only the managed resource controllers of the kind's group count",
			count:  func(k *e2eKind) float64 { return k.providerReconciles(d) },
			want:   map[string]float64{"WidgetClaim": 6, "XWidget": 4},
		},
		"APIRequests": {
			reason: "requests to the kind's API groups count, shared ones (Secrets) do not",
			count:  func(k *e2eKind) float64 { return k.apiRequests(d) },
			want:   map[string]float64{"WidgetClaim": 10, "XWidget": 5},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]float64{}
			for _, k := range []*e2eKind{kindClaim, kindXWidget} {
				got[k.name] = tc.count(k)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestExampleMaker checks how the e2e section makes its objects from the
// examples (it runs without WIDGET_BENCH).
func TestExampleMaker(t *testing.T) {
	root, err := platform.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &e2eEnv{root: root}
	type object struct {
		Kind, Namespace, Name, Secret string
		Keys                          int
	}
	cases := map[string]struct {
		reason  string
		example string
		want    object
	}{
		"Claim": {
			reason:  "a claim gets its own connection Secret",
			example: "legacy/claim.yaml",
			want:    object{Kind: "WidgetClaim", Namespace: "ns", Name: "c-0001", Secret: "c-0001-widget", Keys: 1},
		},
		"XWidget": {
			reason:  "an XWidget names no connection Secret (function-widget names it after the XR) and asks for two keys",
			example: "namespaced/xr.yaml",
			want:    object{Kind: "XWidget", Namespace: "ns", Name: "x-0001", Keys: 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mk, keys := e.exampleMaker(t, tc.example)
			u := mk("ns", tc.want.Name)
			secret, _, _ := unstructured.NestedString(u.Object, "spec", "writeConnectionSecretToRef", "name")
			got := object{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Secret: secret, Keys: keys}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
