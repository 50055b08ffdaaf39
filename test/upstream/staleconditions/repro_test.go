package staleconditions

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestManifests(t *testing.T) {
	objs, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, 0, len(objs))
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	want := []string{"ClusterRole/crossplane:repro:configmaps", "CompositeResourceDefinition/xrepros.repro.example.org", "Composition/xrepros.repro.example.org"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("Manifests(): -want, +got:\n%s", diff)
	}

	// The Composition composes the XRD's kind, and core may compose what
	// it composes.
	xrd, comp, role := objs[1].Object, objs[2].Object, objs[0].Object
	group := xrd["spec"].(map[string]any)["group"].(string)
	kind := xrd["spec"].(map[string]any)["names"].(map[string]any)["kind"].(string)
	ref := comp["spec"].(map[string]any)["compositeTypeRef"].(map[string]any)
	if got, want := ref["apiVersion"].(string)+"/"+ref["kind"].(string), GVR.GroupVersion().String()+"/"+kind; got != want || group != GVR.Group {
		t.Errorf("the Composition composes %s, want %s (XRD group %s)", got, want, group)
	}
	if got := objs[0].GetLabels()["rbac.crossplane.io/aggregate-to-crossplane"]; got != "true" {
		t.Errorf("the ClusterRole is not aggregated into Crossplane's: label %q", got)
	}
	rules := role["rules"].([]any)
	if diff := cmp.Diff([]any{"configmaps"}, rules[0].(map[string]any)["resources"]); diff != "" {
		t.Errorf("the ClusterRole's resources: -want, +got:\n%s", diff)
	}
	step := comp["spec"].(map[string]any)["pipeline"].([]any)
	if len(step) != 1 || step[0].(map[string]any)["functionRef"].(map[string]any)["name"] != "function-patch-and-transform" {
		t.Errorf("the pipeline must run function-patch-and-transform alone, got %v", step)
	}
}
