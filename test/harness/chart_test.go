package harness

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRenderChartRBAC renders the RBAC of Crossplane's Helm chart as the
// harness applies it: the ServiceAccounts and bindings of core and the RBAC
// manager in Crossplane's namespace, and the aggregated roles.
func TestRenderChartRBAC(t *testing.T) {
	dir := os.Getenv("CROSSPLANE_CHART")
	if dir == "" {
		t.Skip("CROSSPLANE_CHART is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	objs, err := renderChartRBAC(dir, "xp-system")
	if err != nil {
		t.Fatalf("renderChartRBAC(...): %v", err)
	}
	got := map[string]bool{}
	for _, u := range objs {
		got[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = true
		if u.GetKind() == "ClusterRoleBinding" && u.GetName() == "crossplane" {
			subs, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			want := []any{map[string]any{"kind": "ServiceAccount", "name": "crossplane", "namespace": "xp-system"}}
			if diff := cmp.Diff(want, subs); diff != "" {
				t.Errorf("ClusterRoleBinding crossplane subjects: -want +got:\n%s", diff)
			}
		}
	}
	for _, want := range []string{
		"ServiceAccount/xp-system/crossplane",
		"ServiceAccount/xp-system/rbac-manager",
		"ClusterRole//crossplane",
		"ClusterRole//crossplane:system:aggregate-to-crossplane",
		"ClusterRoleBinding//crossplane",
		"ClusterRole//crossplane-rbac-manager",
		"ClusterRoleBinding//crossplane-rbac-manager",
		"ClusterRole//crossplane-admin",
		"ClusterRole//crossplane-edit",
		"ClusterRole//crossplane-view",
		"ClusterRole//crossplane-browse",
	} {
		if !got[want] {
			t.Errorf("the rendered chart lacks %s; it has %v", want, got)
		}
	}
}
