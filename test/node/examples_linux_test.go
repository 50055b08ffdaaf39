package node_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestExamplesReady sees the example XWidget and WidgetClaim go Ready on
// the platform installed as a platform team installs it on a real cluster,
// with every pod run by kubelet on the node.
func TestExamplesReady(t *testing.T) {
	c := suite(t)
	kc := c.Client()
	t.Logf("platform installed %s after the suite started", time.Since(env.begin).Round(time.Second))
	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespaced/xr.yaml", "legacy/claim.yaml"} {
		o, err := platform.ReadObjects(filepath.Join(env.rootDir, "examples", "composition", f))
		if err != nil {
			t.Fatal(err)
		}
		ensureNamespace(t, kc, o[0].GetNamespace())
		objs = append(objs, o...)
	}
	applied := time.Now()
	if err := platform.Create(t.Context(), kc, objs...); err != nil {
		t.Fatal(err)
	}
	waitReady(t, kc, 3*time.Minute, objs...)
	t.Logf("MEASURED the example XWidget and WidgetClaim Ready %s after they were applied", time.Since(applied).Round(100*time.Millisecond))

	// Every pod runs on the node: CoreDNS, core, the RBAC manager, the
	// provider's replicas and the function.
	pods := &corev1.PodList{}
	if err := kc.List(t.Context(), pods); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"coredns-": 0, "crossplane-": 0, "crossplane-rbac-manager-": 0, platform.ProviderName + "-": 0, platform.FunctionName + "-": 0}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s %s on %s, IP %s", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
		if p.Spec.NodeName != c.Node.Name() || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s/%s: %s on %q, want Running on %s", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, c.Node.Name())
		}
		longest := ""
		for prefix := range want {
			if strings.HasPrefix(p.Name, prefix) && len(prefix) > len(longest) {
				longest = prefix
			}
		}
		if longest != "" {
			want[longest]++
		}
	}
	for prefix, n := range want {
		wantN := 1
		if prefix == platform.ProviderName+"-" {
			wantN = 2 // examples/runtime's DeploymentRuntimeConfig
		}
		if n != wantN {
			t.Errorf("%d pods %s*, want %d", n, prefix, wantN)
		}
	}
}
