//go:build linux

package bench

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// variantPolicy is function-widget with a namespace policy with quotas over
// the run's namespace (docs/policy.md): every XR then requires the Namespace,
// the policies and everything its namespace has. Issue 31 asks what that
// costs against no policy (variantWidget) at 100 claims: within 1.2x.
var variantPolicy = &e2eVariant{
	name: "policy", title: "function-widget, namespace quotas", firstStep: platform.FunctionName,
	install: installPolicy,
}

// benchPolicyQuotas admit every object of a run of up to 200 (a claim has
// one Widget and at most two WidgetKeys), so the quotas cost what they cost
// without rejecting anything.
var benchPolicyQuotas = map[string]any{"widgets": int64(200), "keys": int64(400)}

// installPolicy lets core read Namespaces (examples/rbac), as a platform team
// that uses namespace policies does, and creates a namespace policy that
// selects the run's namespace by the name label the API server sets.
func installPolicy(ctx context.Context, t *testing.T, e *e2eEnv) {
	t.Helper()
	objs, err := platform.ReadObjects(filepath.Join(e.root, "examples", "rbac", "crossplane-namespaces.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ec := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"widgetPolicy": map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": e2eNamespace}},
		"quotas":            benchPolicyQuotas,
	}}}}
	ec.SetAPIVersion("apiextensions.crossplane.io/v1beta1")
	ec.SetKind("EnvironmentConfig")
	ec.SetName("widget-policy-" + e2eNamespace)
	ec.SetLabels(map[string]string{"fn.widgetco.io/widget-policy": "true"})
	if err := platform.Create(ctx, e.c.Client(), append(objs, ec)...); err != nil {
		t.Fatal(err)
	}
}
