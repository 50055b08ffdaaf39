package fn

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// opInput is a RotateKeys input with extra fields in JSON.
func opInput(extra string) *structpb.Struct {
	return resource.MustStructJSON(`{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "RotateKeys", "target": {"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "namespace": "team-a", "matchLabels": {"project": "x"}}` + extra + `}`)
}

// xwidgetsOf returns n XWidgets of team-a as required resources.
func xwidgetsOf(n int, labels string) *fnv1.Resources {
	r := &fnv1.Resources{}
	for i := range n {
		r.Items = append(r.Items, &fnv1.Resource{Resource: resource.MustStructJSON(fmt.Sprintf(`{"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "metadata": {"namespace": "team-a", "name": "app-%03d", "labels": %s}, "spec": {"keys": 2}}`, i, labels))})
	}
	return r
}

func TestRotateKeys(t *testing.T) {
	now := time.Date(2026, 11, 29, 15, 0, 0, 500, time.UTC)
	const at = "2026-11-29T15:00:00Z"
	selector := map[string]*fnv1.ResourceSelector{reqTargets: {
		ApiVersion: "platform.widgetco.io/v1alpha1", Kind: "XWidget", Namespace: ptrTo("team-a"),
		Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{"project": "x"}}},
	}}
	type want struct {
		requirements bool
		// desired are the names of the objects asked to rotate, with the
		// rotation each is asked for.
		desired map[string]string
		output  string
		fatal   string
		normal  string
	}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		want   want
	}{
		"AsksForTargets": {
			reason: "The first call asks core for the selected objects and changes nothing.",
			req:    &fnv1.RunFunctionRequest{Input: opInput("")},
			want:   want{requirements: true},
		},
		"Rotates": {
			reason: "Each selected object is asked to rotate its keys now; the output counts and names them.",
			req:    &fnv1.RunFunctionRequest{Input: opInput(""), RequiredResources: map[string]*fnv1.Resources{reqTargets: xwidgetsOf(2, `{"project": "x"}`)}},
			want: want{requirements: true,
				desired: map[string]string{"team-a/app-000": `{"requestedAt":"` + at + `"}`, "team-a/app-001": `{"requestedAt":"` + at + `"}`},
				output:  `{"names":["team-a/app-000","team-a/app-001"],"requestedAt":"` + at + `","revokePrevious":false,"targets":2}`,
				normal:  "Asked 2 XWidget objects to rotate their keys at " + at + "; the replaced keys stay valid for their overlap"},
		},
		"RevokesPrevious": {
			reason: "revokePrevious asks for the replaced keys to be revoked at the same time.",
			req:    &fnv1.RunFunctionRequest{Input: opInput(`, "revokePrevious": true`), RequiredResources: map[string]*fnv1.Resources{reqTargets: xwidgetsOf(1, `{"project": "x"}`)}},
			want: want{requirements: true,
				desired: map[string]string{"team-a/app-000": `{"requestedAt":"` + at + `","revokePreviousAt":"` + at + `"}`},
				output:  `{"names":["team-a/app-000"],"requestedAt":"` + at + `","revokePrevious":true,"targets":1}`,
				normal:  "Asked 1 XWidget objects to rotate their keys at " + at + "; the replaced keys are revoked at once"},
		},
		"NoneSelected": {
			reason: "A selector that matches nothing changes nothing, and says so.",
			req:    &fnv1.RunFunctionRequest{Input: opInput(""), RequiredResources: map[string]*fnv1.Resources{reqTargets: {}}},
			want: want{requirements: true, desired: map[string]string{},
				output: `{"names":[],"requestedAt":"` + at + `","revokePrevious":false,"targets":0}`,
				normal: "Asked 0 XWidget objects to rotate their keys at " + at + "; the replaced keys stay valid for their overlap"},
		},
		"OverTheBound": {
			reason: "A selection larger than maxTargets changes nothing and fails the step, saying how to narrow it.",
			req:    &fnv1.RunFunctionRequest{Input: opInput(`, "maxTargets": 2`), RequiredResources: map[string]*fnv1.Resources{reqTargets: xwidgetsOf(3, `{"project": "x"}`)}},
			want:   want{requirements: true, fatal: "the target selects 3 XWidget objects, more than maxTargets (2): nothing was changed"},
		},
		"InvalidInput": {
			reason: "Every mistake in the input is named at once, before anything is asked for.",
			req: &fnv1.RunFunctionRequest{Input: resource.MustStructJSON(`{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "RotateKeys", "maxTargets": 99999,
				"target": {"apiVersion": "xwidget", "namespace": "Team A", "matchLabels": {"bad key!": "x"}}}`)},
			want: want{fatal: `invalid RotateKeys input: maxTargets 99999 must be from 1 to 5000; target.apiVersion "xwidget" must be group/version`},
		},
		"Watched": {
			reason: "In a WatchOperation only the watched object is rotated, when the target selects it.",
			req: &fnv1.RunFunctionRequest{Input: opInput(""), RequiredResources: map[string]*fnv1.Resources{
				reqWatched: xwidgetsOf(1, `{"project": "x"}`), reqTargets: xwidgetsOf(3, `{"project": "x"}`)}},
			want: want{requirements: true, desired: map[string]string{"team-a/app-000": `{"requestedAt":"` + at + `"}`},
				output: `{"names":["team-a/app-000"],"requestedAt":"` + at + `","revokePrevious":false,"targets":1}`,
				normal: "Asked 1 XWidget objects to rotate their keys at " + at + "; the replaced keys stay valid for their overlap"},
		},
		"WatchedNotSelected": {
			reason: "A watched object the target does not select is not rotated.",
			req: &fnv1.RunFunctionRequest{Input: opInput(""), RequiredResources: map[string]*fnv1.Resources{
				reqWatched: xwidgetsOf(1, `{"project": "y"}`)}},
			want: want{requirements: true, desired: map[string]string{},
				output: `{"names":[],"requestedAt":"` + at + `","revokePrevious":false,"targets":0}`,
				normal: "Asked 0 XWidget objects to rotate their keys at " + at + "; the replaced keys stay valid for their overlap"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !isOperation(tc.req) {
				t.Fatalf("%s\nisOperation(...) = false for a RotateKeys input", tc.reason)
			}
			rsp := rotateKeys(tc.req, now, logging.NewNopLogger())
			if got := rsp.GetRequirements() != nil; got != tc.want.requirements {
				t.Errorf("%s\nrequirements: want %t, got %v", tc.reason, tc.want.requirements, rsp.GetRequirements())
			} else if got {
				if diff := cmp.Diff(selector, rsp.GetRequirements().GetResources(), protocmp.Transform()); diff != "" {
					t.Errorf("%s\nrequirements: -want, +got:\n%s", tc.reason, diff)
				}
			}
			var fatal, normal string
			for _, r := range rsp.GetResults() {
				switch r.GetSeverity() {
				case fnv1.Severity_SEVERITY_FATAL:
					fatal = r.GetMessage()
				case fnv1.Severity_SEVERITY_NORMAL:
					normal = r.GetMessage()
				default:
					t.Errorf("%s\nunexpected result %s: %s", tc.reason, r.GetSeverity(), r.GetMessage())
				}
			}
			if !strings.HasPrefix(fatal, tc.want.fatal) || (tc.want.fatal == "") != (fatal == "") {
				t.Errorf("%s\nfatal result: want prefix %q, got %q", tc.reason, tc.want.fatal, fatal)
			}
			if normal != tc.want.normal {
				t.Errorf("%s\nnormal result: want %q, got %q", tc.reason, tc.want.normal, normal)
			}
			var desired map[string]string
			if tc.want.desired != nil {
				desired = map[string]string{}
			}
			for id, r := range rsp.GetDesired().GetResources() {
				obj := r.GetResource().AsMap()
				md := obj["metadata"].(map[string]any)
				if obj["kind"] != "XWidget" || obj["apiVersion"] != "platform.widgetco.io/v1alpha1" || md["namespace"].(string)+"/"+md["name"].(string) != id || len(obj) != 4 || len(md) != 2 {
					t.Errorf("%s\ndesired %s: want exactly apiVersion, kind, name, namespace and spec.rotation, got %v", tc.reason, id, obj)
				}
				j, _ := structpb.NewStruct(obj["spec"].(map[string]any)["rotation"].(map[string]any))
				b, _ := j.MarshalJSON()
				desired[id] = compactJSON(t, b)
			}
			if diff := cmp.Diff(tc.want.desired, desired); diff != "" {
				t.Errorf("%s\ndesired rotations: -want, +got:\n%s", tc.reason, diff)
			}
			got := ""
			if o := rsp.GetOutput(); o != nil {
				b, _ := o.MarshalJSON()
				got = compactJSON(t, b)
			}
			if got != tc.want.output {
				t.Errorf("%s\noutput: want %s, got %s", tc.reason, tc.want.output, got)
			}
		})
	}
}

// TestRotateKeysOutputIsBounded: the output names at most MaxTargetsListed
// objects and counts the rest.
func TestRotateKeysOutputIsBounded(t *testing.T) {
	req := &fnv1.RunFunctionRequest{Input: opInput(""), RequiredResources: map[string]*fnv1.Resources{reqTargets: xwidgetsOf(250, `{"project": "x"}`)}}
	rsp := rotateKeys(req, time.Now(), logging.NewNopLogger())
	out := rsp.GetOutput().AsMap()
	if n := len(out["names"].([]any)); n != 100 || out["namesOmitted"] != float64(150) || out["targets"] != float64(250) || len(rsp.GetDesired().GetResources()) != 250 {
		t.Errorf("250 targets: want 100 names, 150 omitted, 250 counted and desired; got %d names, %v omitted, %v counted, %d desired", n, out["namesOmitted"], out["targets"], len(rsp.GetDesired().GetResources()))
	}
}

// TestCompositionIsNoOperation: a composition's request, even with a
// RotateKeys-looking input, is composed, not run as an operation.
func TestCompositionIsNoOperation(t *testing.T) {
	req := &fnv1.RunFunctionRequest{Input: opInput(""), Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget"}`)}}}
	if isOperation(req) {
		t.Error("a request with an observed composite was taken for an operation")
	}
	if isOperation(&fnv1.RunFunctionRequest{Input: resource.MustStructJSON(`{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "WidgetPolicy"}`)}) {
		t.Error("a WidgetPolicy input was taken for an operation")
	}
}

func ptrTo(s string) *string { return &s }

// compactJSON re-encodes JSON with sorted keys and no spaces.
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestOperationExamples runs the input of each example of
// examples/operations: each is valid and an operation's.
func TestOperationExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "operations", "*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("want the 5 examples of examples/operations, got %v (%v)", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var op map[string]any
			if err := yaml.Unmarshal(b, &op); err != nil {
				t.Fatal(err)
			}
			spec := op["spec"].(map[string]any)
			if tmpl, ok := spec["operationTemplate"].(map[string]any); ok {
				spec = tmpl["spec"].(map[string]any)
			}
			step := spec["pipeline"].([]any)[0].(map[string]any)
			if ref := step["functionRef"].(map[string]any)["name"]; ref != "widgetco-function-widget" {
				t.Errorf("functionRef.name %v, want the Function the platform installs", ref)
			}
			in, err := structpb.NewStruct(step["input"].(map[string]any))
			if err != nil {
				t.Fatal(err)
			}
			req := &fnv1.RunFunctionRequest{Input: in}
			if !isOperation(req) {
				t.Fatal("the example's input is not an operation's")
			}
			req.RequiredResources = map[string]*fnv1.Resources{reqTargets: {}, reqComposites: {}, reqInventory: inventoryJSON("True", "[]", 0), reqInventories: {}}
			rsp := (&Function{log: logging.NewNopLogger(), clock: time.Now}).runOperation(t.Context(), req)
			if rsp.GetOutput() == nil {
				t.Error("the example's operation wrote no output")
			}
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					t.Errorf("the example's input is refused: %s", r.GetMessage())
				}
			}
		})
	}
}

// BenchmarkRotateKeys is one RotateKeys step over 1,000 and 5,000 selected
// XWidgets (the default and the most maxTargets allows): the function's
// share of a fleet-wide rotation. It reports the response's size.
func BenchmarkRotateKeys(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			req := &fnv1.RunFunctionRequest{Input: opInput(`, "maxTargets": 5000`), RequiredResources: map[string]*fnv1.Resources{reqTargets: xwidgetsOf(n, `{"project": "x"}`)}}
			var size int
			for b.Loop() {
				rsp := rotateKeys(req, time.Now(), logging.NewNopLogger())
				if len(rsp.GetDesired().GetResources()) != n {
					b.Fatalf("want %d desired, got %d", n, len(rsp.GetDesired().GetResources()))
				}
				size = proto.Size(rsp)
			}
			b.ReportMetric(float64(size), "response-bytes")
		})
	}
}

// BenchmarkRotateKeysRequest runs RotateKeys on requests as core sends them
// to the gRPC server: n copies of an XWidget read from a cluster (with its
// managedFields and status; testdata/xwidget-from-core.json), unmarshalled
// from the wire first. request-bytes is what --max-recv-message-size must
// admit; live-bytes is the heap the request and the response hold at the
// end of the call.
func BenchmarkRotateKeysRequest(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "xwidget-from-core.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			items := make([]*fnv1.Resource, n)
			for i := range items {
				// The copies keep their labels and namespace: the
				// selector matches them all.
				items[i] = &fnv1.Resource{Resource: resource.MustStructJSON(strings.Replace(string(raw), `"name":"x-00007"`, fmt.Sprintf(`"name":"x-%05d"`, i), 1))}
			}
			in := `{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "RotateKeys", "target": {"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "namespace": "bench-op"}, "revokePrevious": true, "maxTargets": 5000}`
			wire, err := proto.Marshal(&fnv1.RunFunctionRequest{Input: resource.MustStructJSON(in), RequiredResources: map[string]*fnv1.Resources{reqTargets: {Items: items}}})
			if err != nil {
				b.Fatal(err)
			}
			var live uint64
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				req := &fnv1.RunFunctionRequest{}
				if err := proto.Unmarshal(wire, req); err != nil {
					b.Fatal(err)
				}
				rsp := rotateKeys(req, time.Now(), logging.NewNopLogger())
				if len(rsp.GetDesired().GetResources()) != n {
					b.Fatalf("want %d desired, got %d: %v", n, len(rsp.GetDesired().GetResources()), rsp.GetResults())
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				live = max(live, after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))
				runtime.KeepAlive(req)
				runtime.KeepAlive(rsp)
			}
			b.ReportMetric(float64(len(wire)), "request-bytes")
			b.ReportMetric(float64(live), "live-bytes")
		})
	}
}
