package fn

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func reportInput(extra string) *fnv1.RunFunctionRequest {
	return &fnv1.RunFunctionRequest{Input: resource.MustStructJSON(`{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "WidgetReport", "target": {"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "namespace": "team-a"}` + extra + `}`)}
}

func xrWith(name, status string) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructJSON(`{"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "metadata": {"namespace": "team-a", "name": "` + name + `"}, "status": ` + status + `}`)}
}

func TestWidgetReport(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ready := `{"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}, {"type": "PolicyCompliant", "status": "True", "reason": "Compliant"}]}`
	long := strings.Repeat("x", 1000)
	targets := &fnv1.Resources{Items: []*fnv1.Resource{
		xrWith("a-ready", ready),
		xrWith("b-creating", `{"conditions": [{"type": "Ready", "status": "False", "reason": "Creating"}]}`),
		xrWith("c-quota", `{"conditions": [{"type": "Ready", "status": "False", "reason": "ReconcileError"}, {"type": "PolicyCompliant", "status": "False", "reason": "QuotaExceeded", "message": "`+long+`"}]}`),
		xrWith("d-overdue", `{"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}], "rotation": {"nextRotationAt": "2026-11-29T09:00:00Z"}}`),
		xrWith("e-due-soon", `{"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}], "rotation": {"nextRotationAt": "2026-11-29T11:30:00Z"}}`),
		xrWith("f-drifted", `{"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}], "drift": {"repairs": 2, "lastRepairAt": "2026-11-29T10:00:00Z", "lastChange": "size: want \"large\", have \"small\""}}`),
		xrWith("g-drifted-long-ago", `{"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}], "drift": {"repairs": 1, "lastRepairAt": "2026-11-26T10:00:00Z"}}`),
	}}
	inventories := &fnv1.Resources{Items: []*fnv1.Resource{
		{Resource: resource.MustStructJSON(`{"apiVersion": "widget.m.widgetco.io/v1beta1", "kind": "WidgetInventory", "metadata": {"namespace": "team-a", "name": "b"}, "status": {"atProvider": {"unowned": 2}}}`)},
		{Resource: resource.MustStructJSON(`{"apiVersion": "widget.m.widgetco.io/v1beta1", "kind": "WidgetInventory", "metadata": {"namespace": "team-a", "name": "a"}, "status": {"atProvider": {"unowned": 3}}}`)},
	}}

	req := reportInput("")
	if !isOperation(req) {
		t.Fatal("isOperation(...) = false for a WidgetReport input")
	}
	if rsp := widgetReport(req, now, logging.NewNopLogger()); rsp.GetRequirements() == nil || rsp.GetOutput() != nil {
		t.Fatalf("the first call must ask for the targets and inventories and report nothing: %v", rsp)
	}

	req = reportInput(`, "maxEntries": 3`)
	req.RequiredResources = map[string]*fnv1.Resources{reqTargets: targets, reqInventories: inventories}
	rsp := widgetReport(req, now, logging.NewNopLogger())
	out := rsp.GetOutput().AsMap()
	want := map[string]any{
		"kind": "XWidget", "objects": float64(7), "ready": float64(5),
		"counts":          map[string]any{"Ready/Creating": float64(1), "Ready/ReconcileError": float64(1), "PolicyCompliant/QuotaExceeded": float64(1), "Rotation/Overdue": float64(1), "Drift/Repaired": float64(1)},
		"findingsOmitted": float64(2),
		"unownedWidgets":  float64(5),
		"inventories":     []any{map[string]any{"inventory": "team-a/a", "unowned": float64(3)}, map[string]any{"inventory": "team-a/b", "unowned": float64(2)}},
	}
	findings := out["findings"]
	delete(out, "findings")
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("report: -want, +got:\n%s", diff)
	}
	list, _ := findings.([]any)
	if len(list) != 3 {
		t.Fatalf("want 3 findings listed (maxEntries), got %v", findings)
	}
	first := list[0].(map[string]any)
	if first["object"] != "team-a/b-creating" || first["condition"] != "Ready" || first["reason"] != "Creating" {
		t.Errorf("findings are not in object order: first %v", first)
	}
	for _, f := range list {
		if m := f.(map[string]any)["message"].(string); len(m) > 256+3 {
			t.Errorf("a finding quotes %d bytes of a message, want at most 259", len(m))
		}
	}
	if got := rsp.GetResults()[0].GetMessage(); got != "Reported on 7 XWidget objects: 5 Ready, 5 findings; 5 unowned widgets in 2 WidgetInventories" {
		t.Errorf("result: %q", got)
	}

	bad := reportInput(`, "maxEntries": 9999`)
	if r := widgetReport(bad, now, logging.NewNopLogger()); r.GetResults()[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
		t.Errorf("maxEntries 9999 was accepted: %v", r.GetResults())
	}
}

func TestFindingsDrift(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ready := `"conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]`
	cases := map[string]struct {
		reason string
		status string
		within time.Duration
		want   []finding
	}{
		"Recent": {
			reason: "A repair within the window is reported with when, how often and what it restored.",
			status: `{` + ready + `, "drift": {"repairs": 3, "lastRepairAt": "2026-11-29T11:00:00Z", "lastChange": "description: want \"a\", have \"b\""}}`,
			within: 24 * time.Hour,
			want: []finding{{Object: "team-a/x", Condition: "Drift", Reason: "Repaired",
				Message: `the widget was changed outside Crossplane and restored at 2026-11-29T11:00:00Z (3 repairs in all): description: want "a", have "b"`}},
		},
		"Old": {
			reason: "A repair before the window is not reported.",
			status: `{` + ready + `, "drift": {"repairs": 3, "lastRepairAt": "2026-11-29T10:59:59Z"}}`,
			within: time.Hour,
		},
		"Unreadable": {
			reason: "A repair time that is not a time is no finding.",
			status: `{` + ready + `, "drift": {"repairs": 3, "lastRepairAt": "yesterday"}}`,
			within: 24 * time.Hour,
		},
		"None": {
			reason: "An XR without a drift record has no drift finding.",
			status: `{` + ready + `}`,
			within: 24 * time.Hour,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal([]byte(`{"metadata": {"namespace": "team-a", "name": "x"}, "status": `+tc.status+`}`), &u.Object); err != nil {
				t.Fatal(err)
			}
			got := findings(u, now, window{overdue: time.Hour, drift: tc.within})
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nfindings(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
