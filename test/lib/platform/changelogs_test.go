package platform

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChangeLogsRuntimeConfig pins examples/runtime/changelogs.yaml to the
// provider-widget DeploymentRuntimeConfig of deploymentruntimeconfigs.yaml:
// the same, apart from the flag, the sidecar and the volume they share.
func TestChangeLogsRuntimeConfig(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	objs, err := ReadObjects(filepath.Join(root, "examples", "runtime", "deploymentruntimeconfigs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := withChangeLogs(root, objs, "127.0.0.1:5000/widgetco/"+ChangeLogsStandIn)
	if err != nil {
		t.Fatal(err)
	}
	var plain, changeLogs *unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() == ProviderRuntimeConfig {
			plain = o
		}
	}
	for _, o := range got {
		if o.GetName() == ProviderRuntimeConfig {
			changeLogs = o.DeepCopy()
		}
	}
	path := []string{"spec", "deploymentTemplate", "spec", "template", "spec"}
	spec, _, _ := unstructured.NestedMap(changeLogs.Object, path...)
	cs, _ := spec["containers"].([]any)
	if len(cs) != 2 {
		t.Fatalf("changelogs.yaml has %d containers, want the provider's and the sidecar", len(cs))
	}
	sidecar, _ := cs[1].(map[string]any)
	if diff := cmp.Diff("127.0.0.1:5000/widgetco/"+ChangeLogsStandIn, sidecar["image"]); diff != "" {
		t.Errorf("The stand-in replaces the upstream sidecar image.\nimage: -want, +got:\n%s", diff)
	}
	mount := []any{map[string]any{"name": "changelogs", "mountPath": "/var/run/changelogs"}}
	if diff := cmp.Diff(mount, sidecar["volumeMounts"]); diff != "" {
		t.Errorf("The sidecar mounts the shared volume where it listens.\nvolumeMounts: -want, +got:\n%s", diff)
	}
	vols, _ := spec["volumes"].([]any)
	if len(vols) == 0 || !cmp.Equal(map[string]any{"name": "changelogs", "emptyDir": map[string]any{}}, vols[len(vols)-1]) {
		t.Errorf("The shared volume is an emptyDir, the last volume; volumes are %v", vols)
	}

	// Take the change logs away: what is left is the plain one.
	provider, _ := cs[0].(map[string]any)
	mounts, _ := provider["volumeMounts"].([]any)
	if len(mounts) == 0 || !cmp.Equal(mount[0], mounts[len(mounts)-1]) {
		t.Errorf("The provider mounts the shared volume where it dials, its last mount; mounts are %v", mounts)
	}
	if len(mounts) > 0 {
		provider["volumeMounts"] = mounts[:len(mounts)-1]
	}
	if len(vols) > 0 {
		spec["volumes"] = vols[:len(vols)-1]
	}
	args, _, _ := unstructured.NestedStringSlice(provider, "args")
	if !slices.Contains(args, "--enable-changelogs") {
		t.Errorf("The provider's args %v lack --enable-changelogs", args)
	}
	provider["args"] = toAny(slices.DeleteFunc(args, func(a string) bool { return a == "--enable-changelogs" }))
	spec["containers"] = []any{provider}
	if err := unstructured.SetNestedMap(changeLogs.Object, spec, path...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plain.Object, changeLogs.Object); diff != "" {
		t.Errorf("changelogs.yaml is deploymentruntimeconfigs.yaml's provider-widget plus change logs, and nothing else.\n-deploymentruntimeconfigs.yaml, +changelogs.yaml without change logs:\n%s", diff)
	}
}

func toAny(s []string) []any {
	out := make([]any, 0, len(s))
	for _, x := range s {
		out = append(out, x)
	}
	return out
}
