//go:build linux

package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// uptest's annotations, which examples/provider carries.
const (
	annotationExampleID       = "meta.upbound.io/example-id"
	annotationUpdateParameter = "uptest.upbound.io/update-parameter"
)

// TestUptestPhases runs the phases upjet's uptest runs in every upjet
// provider's CI over the managed resources of examples/provider that carry
// its example-id annotation, after the setup script uptest would be given:
// apply and wait for Ready; update the annotated field and see it in
// status.atProvider; import (pause, scale the provider to zero and back,
// clear the conditions, unpause: Ready again with the same
// status.atProvider.id); delete and wait until none is left.
func TestUptestPhases(t *testing.T) {
	s := newScenario(t, false)
	kc := suite.c.Client()
	kubectl := os.Getenv("KUBECTL_BIN")
	if kubectl == "" {
		t.Fatal("KUBECTL_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}

	// Setup, as uptest's --setup-script.
	setup := exec.CommandContext(t.Context(), "bash", filepath.Join(suite.root, "examples", "provider", "setup.sh"))
	setup.Env = append(os.Environ(),
		"KUBECONFIG="+suite.c.Kubeconfig,
		"PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"),
		"WIDGET_API_ENDPOINT="+suite.widgets.URL,
		"WIDGET_API_TOKEN="+apiToken,
	)
	out, err := setup.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/provider/setup.sh: %v\n%s", err, out)
	}
	if strings.Contains(string(out), apiToken) {
		t.Errorf("examples/provider/setup.sh printed the token:\n%s", out)
	}
	t.Logf("examples/provider/setup.sh: %s", strings.TrimSpace(string(out)))

	var mrs []*unstructured.Unstructured
	for _, f := range []string{"widget.yaml", "cluster-widget.yaml"} {
		objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "provider", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetAnnotations()[annotationExampleID] != "" {
				mrs = append(mrs, o)
			}
		}
	}
	if len(mrs) < 3 {
		t.Fatalf("%d examples carry %s, want the Widget, the WidgetKey and the cluster-scoped Widget", len(mrs), annotationExampleID)
	}

	// Apply.
	for _, mr := range mrs {
		if err := kc.Create(t.Context(), mr.DeepCopy()); err != nil {
			t.Fatalf("cannot apply %s %s: %v", mr.GetKind(), platform.Name(mr), err)
		}
	}
	for _, mr := range mrs {
		s.waitReady(mr)
	}
	t.Logf("apply: %d managed resources Ready", len(mrs))

	// Update.
	for _, mr := range mrs {
		param := mr.GetAnnotations()[annotationUpdateParameter]
		if param == "" {
			continue
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(param), &want); err != nil {
			t.Fatalf("%s %s: %s is not a JSON object: %v", mr.GetKind(), platform.Name(mr), annotationUpdateParameter, err)
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"forProvider": want}})
		if err := kc.Patch(t.Context(), mr.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		s.eventually(mr.GetKind()+" "+platform.Name(mr)+" to show the update in status.atProvider", func() error {
			u := get(t, kc, mr)
			at, _, _ := unstructured.NestedMap(u.Object, "status", "atProvider")
			if !subset(any(want), any(at)) {
				return fmt.Errorf("status.atProvider is %v, want it to include %v", at, want)
			}
			return nil
		})
	}
	t.Logf("update: the update parameters are in status.atProvider")

	// Import.
	ids := map[string]string{}
	for _, mr := range mrs {
		id, _, _ := unstructured.NestedString(get(t, kc, mr).Object, "status", "atProvider", "id")
		ids[platform.Name(mr)] = id
		annotate(t, kc, mr, `{"metadata":{"annotations":{"crossplane.io/paused":"true"}}}`)
	}
	scaleProvider(t, kc, 0)
	s.eventually("no provider-widget pod, not even a terminating one", func() error {
		pods := &corev1.PodList{}
		if err := kc.List(t.Context(), pods, client.InNamespace(cluster.CrossplaneNamespace), client.MatchingLabels{"pkg.crossplane.io/provider": platform.ProviderName}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods, such as %s", len(pods.Items), pods.Items[0].Name)
		}
		return nil
	})
	for _, mr := range mrs {
		u := get(t, kc, mr)
		if err := unstructured.SetNestedSlice(u.Object, []any{}, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		if err := kc.Status().Update(t.Context(), u); err != nil {
			t.Fatalf("cannot clear the conditions of %s %s: %v", mr.GetKind(), platform.Name(mr), err)
		}
	}
	for _, mr := range mrs {
		if cs, _, _ := unstructured.NestedSlice(get(t, kc, mr).Object, "status", "conditions"); len(cs) > 0 {
			t.Fatalf("%s %s has conditions again before the provider is back: %v", mr.GetKind(), platform.Name(mr), cs)
		}
	}
	scaledUp := time.Now()
	scaleProvider(t, kc, 2)
	for _, mr := range mrs {
		annotate(t, kc, mr, `{"metadata":{"annotations":{"crossplane.io/paused":null}}}`)
	}
	for _, mr := range mrs {
		s.waitReady(mr)
	}
	t.Logf("MEASURED import: every managed resource Ready again %s after the provider was scaled back up", time.Since(scaledUp).Round(100*time.Millisecond))
	for _, mr := range mrs {
		id, _, _ := unstructured.NestedString(get(t, kc, mr).Object, "status", "atProvider", "id")
		if id == "" || id != ids[platform.Name(mr)] {
			t.Errorf("%s %s: status.atProvider.id %q after the import, want %q", mr.GetKind(), platform.Name(mr), id, ids[platform.Name(mr)])
		}
	}

	// Delete.
	for _, mr := range mrs {
		if err := kc.Delete(t.Context(), mr.DeepCopy()); err != nil && !kerrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, mr := range mrs {
		s.eventually(mr.GetKind()+" "+platform.Name(mr)+" gone", func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(mr.GroupVersionKind())
			err := kc.Get(t.Context(), client.ObjectKeyFromObject(mr), u)
			if err == nil {
				return fmt.Errorf("still there (deleting since %v)", u.GetDeletionTimestamp())
			}
			return client.IgnoreNotFound(err)
		})
	}
	t.Logf("delete: no managed resource of the examples is left")
}

// subset reports whether got holds want, as uptest's assertion does: maps
// may hold more keys (the provider's ownership labels, say), anything else
// must be equal.
func subset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !subset(v, gm[k]) {
			return false
		}
	}
	return true
}

func get(t *testing.T, kc client.Client, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.GroupVersionKind())
	if err := kc.Get(t.Context(), client.ObjectKeyFromObject(o), u); err != nil {
		t.Fatal(err)
	}
	return u
}

func annotate(t *testing.T, kc client.Client, o *unstructured.Unstructured, patch string) {
	t.Helper()
	if err := kc.Patch(t.Context(), o.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// scaleProvider sets the replicas of the provider's DeploymentRuntimeConfig,
// as uptest's import phase does.
func scaleProvider(t *testing.T, kc client.Client, n int) {
	t.Helper()
	drc := &pkgv1beta1.DeploymentRuntimeConfig{}
	drc.SetName(platform.ProviderRuntimeConfig)
	patch := fmt.Sprintf(`{"spec":{"deploymentTemplate":{"spec":{"replicas":%d}}}}`, n)
	if err := kc.Patch(t.Context(), drc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
