//go:build linux

package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// labelTeam is the namespace label the scenarios' namespace policies select
// by, as in examples/policy.
const labelTeam = "widgetco.io/team"

// TestNamespacePolicies gives two teams different namespace policies
// (EnvironmentConfigs, as in examples/policy): the same XWidget is admitted
// in team a and rejected in team b with the field and the policy object
// named; team b cannot dodge its widget quota with a WidgetClaim; and when
// team a's policy narrows, its admitted XWidget stays as it is, Ready, and
// says what it exceeds.
func TestNamespacePolicies(t *testing.T) {
	a := newScenario(t, true)
	b := a.neighbour("b")
	a.allowCoreToReadNamespaces()
	ecA := a.namespacePolicy(map[string]any{"quotas": map[string]any{"widgets": int64(2)}})
	b.namespacePolicy(map[string]any{
		"rules":  map[string]any{"allowedSizes": []any{"small"}, "maxKeys": int64(1)},
		"quotas": map[string]any{"widgets": int64(1)},
	})

	// The same XWidget in both namespaces.
	xa := a.xwidget("web", map[string]any{"size": "medium", "keys": int64(1)})
	xb := b.xwidget("web", map[string]any{"size": "medium", "keys": int64(1)})
	a.create(xa)
	b.create(xb)
	a.waitReady(xa)
	a.wantPolicyCondition(xa, "True", "Compliant", "narrowed for "+a.ns+" by EnvironmentConfig "+a.policyName())
	b.waitPolicyCondition(xb, "PolicyViolation",
		`spec.size: Invalid value: "medium": EnvironmentConfig `+b.policyName()+" allows only small in "+b.ns)
	if ws, err := b.scenarioWidgets(); err != nil || len(ws) != 0 {
		t.Errorf("Widget API holds %d widgets of team b (error %v), want none: the rejected XWidget must compose nothing", len(ws), err)
	}

	// Team b's one widget, then a claim over its quota of one.
	api := b.xwidget("api", map[string]any{"size": "small", "keys": int64(1)})
	b.create(api)
	b.waitReady(api)
	c := b.claim("queue", map[string]any{"size": "small", "keys": int64(0)})
	b.create(c)
	b.waitPolicyCondition(c, "QuotaExceeded", b.ns+" already has 1 of 1 widgets (quota set by EnvironmentConfig "+b.policyName()+"): api")

	// Team a's policy narrows to small widgets. Core watches the
	// EnvironmentConfigs the function required, so nothing else is needed
	// for the XWidget to see it (TestPolicyChangesReachXWidgets).
	a.mergePatch(ecA, `{"data":{"widgetPolicy":{"rules":{"allowedSizes":["small"]}}}}`)
	a.waitPolicyCondition(xa, "AdmittedOverLimit", "spec.size medium is no longer allowed by EnvironmentConfig "+a.policyName())
	if err := isReady(xa); err != nil {
		t.Errorf("XWidget %s/web after its namespace policy narrowed: %v, want it still Ready", a.ns, err)
	}
	a.eventually("team a's widget still medium", func() error {
		ws, err := a.scenarioWidgets()
		if err != nil {
			return err
		}
		if len(ws) != 1 || ws[0].Size != widgetapi.SizeMedium {
			return errors.Errorf("team a's widgets: %+v, want one medium widget", ws)
		}
		return nil
	})
}

// TestQuotaRace creates two XWidgets at once in a namespace with one widget
// slot left. The guarantee (docs/policy.md#the-quota-race): in the end
// exactly one of them complies; the other is rejected (QuotaExceeded) or,
// when both calls ran before either Widget existed, admitted but reported
// over the quota (AdmittedOverLimit). Nothing is deleted. The compliant one
// must be final (its condition no longer provisional): only a count made
// after its Widget was Ready can make it so, and the race used to leave both
// compliant once both had settled on counts made before either Widget
// existed.
func TestQuotaRace(t *testing.T) {
	s := newScenario(t, true)
	s.allowCoreToReadNamespaces()
	s.namespacePolicy(map[string]any{"quotas": map[string]any{"widgets": int64(1)}})
	one := s.xwidget("one", map[string]any{"size": "small", "keys": int64(0)})
	two := s.xwidget("two", map[string]any{"size": "small", "keys": int64(0)})
	s.createConcurrently(2, one, two)

	var reasons []string
	s.eventually("exactly one of two XWidgets complies", func() error {
		reasons = nil
		compliant := 0
		for _, x := range []*unstructured.Unstructured{one, two} {
			if err := s.get(x); err != nil {
				return err
			}
			c := platform.GetCondition(x, "PolicyCompliant")
			reasons = append(reasons, c.Reason)
			switch {
			case c.Status == "True" && strings.Contains(c.Message, "provisional"):
				return errors.Errorf("XWidget %s complies provisionally: %s", x.GetName(), c.Message)
			case c.Status == "True":
				compliant++
			case c.Reason != "QuotaExceeded" && c.Reason != "AdmittedOverLimit":
				return errors.Errorf("XWidget %s: PolicyCompliant %s %s: %s", x.GetName(), c.Status, c.Reason, c.Message)
			}
		}
		if compliant != 1 {
			return errors.Errorf("%d of 2 XWidgets comply (reasons %v), want 1", compliant, reasons)
		}
		return nil
	})
	t.Logf("PolicyCompliant reasons of the two XWidgets: %v", reasons)
}

// policyName is the name of the scenario's namespace policy.
func (s *scenario) policyName() string { return "widget-policy-" + s.ns }

// namespacePolicy labels the scenario's namespace with its own team and
// creates an EnvironmentConfig with the supplied policy that selects it (and
// nothing else: the suite's other scenarios run at once). It is deleted when
// the test ends.
func (s *scenario) namespacePolicy(policy map[string]any) *unstructured.Unstructured {
	s.t.Helper()
	// Until the test ends, after the EnvironmentConfig is deleted: the
	// cleanup registered first runs last.
	suite.policies.RLock()
	s.t.Cleanup(suite.policies.RUnlock)
	ns := &corev1.Namespace{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Name: s.ns}, ns); err != nil {
		s.t.Fatal(err)
	}
	s.mergePatch(ns, `{"metadata":{"labels":{"`+labelTeam+`":"`+s.ns+`"}}}`)

	policy["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{labelTeam: s.ns}}
	ec := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"widgetPolicy": policy}}}
	ec.SetAPIVersion("apiextensions.crossplane.io/v1beta1")
	ec.SetKind("EnvironmentConfig")
	ec.SetName(s.policyName())
	ec.SetLabels(map[string]string{"fn.widgetco.io/widget-policy": "true"})
	s.create(ec)
	s.t.Cleanup(func() {
		if err := suite.kube.Delete(suite.ctx, ec); err != nil && !kerrors.IsNotFound(err) {
			s.t.Errorf("cannot delete EnvironmentConfig %s: %v", ec.GetName(), err)
		}
	})
	return ec
}

// allowCoreToReadNamespaces applies examples/rbac/crossplane-namespaces.yaml,
// as a platform team that uses namespace policies does, and waits until
// Crossplane core may read Namespaces: once a namespace policy exists, every
// XWidget's pipeline needs it.
func (s *scenario) allowCoreToReadNamespaces() {
	s.t.Helper()
	s.t.Logf("Before examples/rbac/crossplane-namespaces.yaml (or with it, if another scenario applied it): %s", coreMayReadNamespaces(s))
	objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "rbac", "crossplane-namespaces.yaml"))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, o := range objs {
		if err := suite.kube.Create(s.ctx, o); err != nil && !kerrors.IsAlreadyExists(err) {
			s.t.Fatalf("cannot create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	s.eventually("Crossplane core may read Namespaces", func() error {
		if err := suite.kube.Get(s.ctx, client.ObjectKey{Name: "crossplane"}, &rbacv1.ClusterRole{}); kerrors.IsNotFound(err) {
			// Core runs with the admin kubeconfig (no Helm chart roles).
			return nil
		}
		if msg := coreMayReadNamespaces(s); msg != "allowed" {
			return errors.New(msg)
		}
		return nil
	})
}

// coreMayReadNamespaces asks the API server whether Crossplane core's
// ServiceAccount may watch Namespaces: "allowed", or why not.
func coreMayReadNamespaces(s *scenario) string {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + cluster.CrossplaneNamespace + ":crossplane",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "namespaces"},
	}}
	if err := suite.kube.Create(s.ctx, sar); err != nil {
		return "cannot ask: " + err.Error()
	}
	if sar.Status.Allowed {
		return "allowed"
	}
	return "core may not watch Namespaces: " + sar.Status.Reason
}

// waitPolicyCondition waits until u's PolicyCompliant condition has the
// supplied reason and a message that contains want.
func (s *scenario) waitPolicyCondition(u *unstructured.Unstructured, reason, want string) {
	s.t.Helper()
	s.eventually(u.GetKind()+" "+platform.Name(u)+" PolicyCompliant "+reason, func() error {
		return s.policyCondition(u, reason, want)
	})
	s.t.Logf("%s %s: PolicyCompliant: %s", u.GetKind(), platform.Name(u), platform.GetCondition(u, "PolicyCompliant").Message)
}

// policyCondition reads u and returns nil if its PolicyCompliant condition has
// the supplied reason and a message that contains want, or what it has.
func (s *scenario) policyCondition(u *unstructured.Unstructured, reason, want string) error {
	if err := s.get(u); err != nil {
		return err
	}
	c := platform.GetCondition(u, "PolicyCompliant")
	if c.Reason != reason || !strings.Contains(c.Message, want) {
		return errors.Errorf("PolicyCompliant %s %s: %q, want reason %s and a message with %q", c.Status, c.Reason, c.Message, reason, want)
	}
	return nil
}

// wantPolicyCondition checks u's PolicyCompliant condition as it is.
func (s *scenario) wantPolicyCondition(u *unstructured.Unstructured, status, reason, want string) {
	s.t.Helper()
	c := platform.GetCondition(u, "PolicyCompliant")
	if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, want) {
		s.t.Errorf("%s %s: PolicyCompliant %s %s: %q, want %s %s with %q", u.GetKind(), platform.Name(u), c.Status, c.Reason, c.Message, status, reason, want)
	}
	s.t.Logf("%s %s: PolicyCompliant: %s", u.GetKind(), platform.Name(u), c.Message)
}
