//go:build linux

package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestRotateKeysOperation: a platform team's Operation (core's
// --enable-operations) rotates and revokes at once the keys of the XWidgets
// of a namespace that one label selects, as after a key store leaked
// (docs/operations.md). The selected XWidget's connection Secret gets a new
// key, the old one stops working, and an XWidget the label does not select
// keeps its key.
func TestRotateKeysOperation(t *testing.T) {
	s := newScenario(t, true)
	leaked := s.xwidget("leaked", map[string]any{"keys": int64(1)})
	leaked.SetLabels(map[string]string{"key-store": "leaked"})
	kept := s.xwidget("kept", map[string]any{"keys": int64(1)})
	s.create(leaked, kept)
	s.waitReady(leaked)
	s.waitReady(kept)
	leakedSecret, keptSecret := leaked.GetName()+"-connection", kept.GetName()+"-connection"
	before := s.connectionSecret(s.ns, leakedSecret, 1)
	keptBefore := string(s.connectionSecret(s.ns, keptSecret, 1)["key-0-name"])
	widget := string(before["widget"])
	if len(before["key-0"]) == 0 || len(before["key-0-name"]) == 0 || keptBefore == "" {
		t.Fatalf("the connection Secrets hold no key-0 before the Operation: %v, kept %q", dataKeys(before), keptBefore)
	}

	op := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ops.crossplane.io/v1alpha1",
		"kind":       "Operation",
		"metadata":   map[string]any{"name": "rotate-" + s.ns},
		"spec": map[string]any{
			"mode": "Pipeline",
			"pipeline": []any{map[string]any{
				"step":        "rotate",
				"functionRef": map[string]any{"name": platform.FunctionName},
				"input": map[string]any{
					"apiVersion": "fn.widgetco.io/v1beta1",
					"kind":       "RotateKeys",
					"target": map[string]any{
						"apiVersion":  xwidgetAPIVersion,
						"kind":        "XWidget",
						"namespace":   s.ns,
						"matchLabels": map[string]any{"key-store": "leaked"},
					},
					"revokePrevious": true,
				},
			}},
		},
	}}
	start := time.Now()
	output := s.runOperation(op)
	if names, _ := output["names"].([]any); output["targets"] != int64(1) || !slices.Equal(names, []any{s.ns + "/leaked"}) {
		t.Errorf("the Operation's output: %v; want 1 target, %s/leaked", output, s.ns)
	}

	now := s.waitKeyName(leakedSecret, string(before["key-0-name"]), waitTimeout)
	s.eventually("the leaked key revoked", func() error {
		if _, err := suite.api.VerifyKey(s.ctx, widget, string(before["key-0"])); err == nil {
			return errors.New("the replaced key still works")
		}
		return nil
	})
	took := time.Since(start)
	after := s.connectionSecret(s.ns, leakedSecret, 1)
	if k, err := suite.api.VerifyKey(s.ctx, widget, string(after["key-0"])); err != nil || k.Name != now {
		t.Errorf("the new key %s: %v (key %v); want it valid", now, err, k)
	}
	if got := string(s.secretData(keptSecret)["key-0-name"]); got != keptBefore {
		t.Errorf("XWidget kept, which the Operation does not select, changed its key: %s -> %s", keptBefore, got)
	}

	// The weekly report's Operation, for this namespace: both XWidgets
	// Ready, nothing refused or overdue.
	report := s.operation("report-"+s.ns, map[string]any{
		"apiVersion": "fn.widgetco.io/v1beta1",
		"kind":       "WidgetReport",
		"target":     map[string]any{"apiVersion": xwidgetAPIVersion, "kind": "XWidget", "namespace": s.ns},
	})
	if report["objects"] != int64(2) || report["ready"] != int64(2) || report["findingsOmitted"] != int64(0) {
		t.Errorf("the report: %v; want 2 objects, 2 Ready, no finding", report)
	}
	t.Logf("Report: %v", report)
	t.Logf("MEASURED rotate-now Operation: key-0 %s of 1 XWidget replaced by %s and revoked %s after the Operation was created", before["key-0-name"], now, took.Round(100*time.Millisecond))
}

// operation runs an Operation of one function-widget step with input, and
// returns the step's output once it succeeded.
func (s *scenario) operation(name string, input map[string]any) map[string]any {
	s.t.Helper()
	return s.runOperation(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ops.crossplane.io/v1alpha1",
		"kind":       "Operation",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{"mode": "Pipeline", "pipeline": []any{map[string]any{
			"step":        "step",
			"functionRef": map[string]any{"name": platform.FunctionName},
			"input":       input,
		}}},
	}})
}

// runOperation creates op, deleted when the test ends, waits until it
// succeeded, and returns its one step's output.
func (s *scenario) runOperation(op *unstructured.Unstructured) map[string]any {
	s.t.Helper()
	s.create(op)
	s.t.Cleanup(func() { _ = suite.kube.Delete(context.Background(), op) })
	s.condition(op, "Succeeded", func(c platform.Condition) bool { return c.Status == "True" })
	steps, _, _ := unstructured.NestedSlice(op.Object, "status", "pipeline")
	if len(steps) != 1 {
		s.t.Fatalf("Operation %s: status.pipeline %v, want one step", op.GetName(), steps)
	}
	out, _, _ := unstructured.NestedMap(steps[0].(map[string]any), "output")
	return out
}
