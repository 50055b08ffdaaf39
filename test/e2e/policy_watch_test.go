//go:build linux

package e2e_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// policyChangeBound is how long a changed namespace policy or namespace label
// may take to reach a Ready XWidget. Crossplane core watches what a function
// required (docs/policy.md#when-a-change-applies), so it takes seconds; the
// bound is generous for a shared machine and well below the 10m TTL of a
// Ready XWidget, which would otherwise be what brings the change.
const policyChangeBound = 2 * time.Minute

// TestPolicyChangesReachXWidgets changes a namespace policy and then the
// namespace's label while a Ready XWidget exists, and touches nothing else:
// each change reaches the XWidget's PolicyCompliant condition well before
// its TTL, because core watches the EnvironmentConfigs and the Namespace the
// function required and reconciles the XRs that required them.
func TestPolicyChangesReachXWidgets(t *testing.T) {
	s := newScenario(t, true)
	s.allowCoreToReadNamespaces()
	ec := s.namespacePolicy(map[string]any{"rules": map[string]any{"allowedSizes": []any{"small", "medium"}}})
	x := s.xwidget("web", map[string]any{"size": "medium", "keys": int64(0)})
	s.create(x)
	s.waitReady(x)
	s.waitPolicyCondition(x, "Compliant", "narrowed for "+s.ns+" by EnvironmentConfig "+s.policyName())

	// The policy narrows: medium is no longer allowed.
	s.mergePatch(ec, `{"data":{"widgetPolicy":{"rules":{"allowedSizes":["small"]}}}}`)
	took := s.eventuallyWithin(policyChangeBound, "a narrowed policy reaches XWidget "+s.ns+"/web", func() error {
		return s.policyCondition(x, "AdmittedOverLimit", "spec.size medium is no longer allowed by EnvironmentConfig "+s.policyName())
	})
	t.Logf("EnvironmentConfig %s narrowed: XWidget %s/web PolicyCompliant AdmittedOverLimit after %s", s.policyName(), s.ns, took.Round(100*time.Millisecond))
	if err := isReady(x); err != nil {
		t.Errorf("XWidget %s/web after its namespace policy narrowed: %v, want it still Ready", s.ns, err)
	}

	// The namespace's label changes: the policy no longer selects it.
	ns := &corev1.Namespace{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Name: s.ns}, ns); err != nil {
		t.Fatal(err)
	}
	s.mergePatch(ns, `{"metadata":{"labels":{"`+labelTeam+`":"nobody"}}}`)
	took = s.eventuallyWithin(policyChangeBound, "a namespace label change reaches XWidget "+s.ns+"/web", func() error {
		return s.policyCondition(x, "Compliant", "no namespace policy applies to "+s.ns)
	})
	t.Logf("Namespace %s relabelled: XWidget %s/web PolicyCompliant Compliant after %s", s.ns, s.ns, took.Round(100*time.Millisecond))
}
