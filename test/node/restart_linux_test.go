package node_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// apiServerDowntime is how long TestAPIServerRestart keeps kube-apiserver
// down: longer than the provider's renew deadline in the suite (10s), so
// its leader gives up leading and exits, and kubelet restarts it.
const apiServerDowntime = 15 * time.Second

// TestAPIServerRestart stops kube-apiserver while claims and XWidgets are
// being created and resized, and starts it again on the same address:
// kubelet, core, the provider and the function (real pods with in-cluster
// clients) recover by themselves, and every one reaches its desired state
// with one widget each.
func TestAPIServerRestart(t *testing.T) {
	c := suite(t)
	kc := c.Client()
	ns := "node-apiserver-restart"
	ensureNamespace(t, kc, ns)
	const n = 10
	xrs := make([]*unstructured.Unstructured, 0, n)
	for i := range n {
		xrs = append(xrs, xr(i%2 == 0, ns, fmt.Sprintf("restart-%02d", i), ns))
	}
	// The first half exist and are Ready; the second half are being
	// created and the first half resized when the API server goes.
	if err := platform.Create(t.Context(), kc, xrs[:n/2]...); err != nil {
		t.Fatal(err)
	}
	waitReady(t, kc, 3*time.Minute, xrs[:n/2]...)
	if err := platform.Create(t.Context(), kc, xrs[n/2:]...); err != nil {
		t.Fatal(err)
	}
	for _, x := range xrs[:n/2] {
		if err := kc.Patch(t.Context(), x.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":"medium"}}`))); err != nil {
			t.Fatal(err)
		}
	}
	restarts := map[string]int32{}
	for _, p := range crossplanePods(t, kc) {
		restarts[p.Name] = restartCount(p)
	}

	stopped := time.Now()
	if err := c.Kube.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped after %s; starting it again %s after it was told to stop", time.Since(stopped).Round(100*time.Millisecond), apiServerDowntime)
	time.Sleep(time.Until(stopped.Add(apiServerDowntime)))
	if err := c.Kube.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	t.Logf("kube-apiserver serves again after %s down", started.Sub(stopped).Round(100*time.Millisecond))

	for i, x := range xrs {
		want := "small"
		if i < n/2 {
			want = "medium"
		}
		wait.For(t, 5*time.Minute, fmt.Sprintf("%s %s Ready at size %s", x.GetKind(), x.GetName(), want), func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(x.GroupVersionKind())
			if err := kc.Get(t.Context(), client.ObjectKeyFromObject(x), u); err != nil {
				return err
			}
			if platform.GetCondition(u, "Ready").Status != "True" || platform.GetCondition(u, "Synced").Status != "True" {
				return fmt.Errorf("%s", platform.StatusLine(u))
			}
			name, _, _ := unstructured.NestedString(u.Object, "status", "externalName")
			w, err := env.api.GetWidget(t.Context(), name)
			if err != nil {
				return err
			}
			if w.Size != want || w.State != widgetapi.StateReady {
				return fmt.Errorf("widget %s is %s and %s, want %s and Ready", name, w.Size, w.State, want)
			}
			return nil
		})
	}
	t.Logf("MEASURED recovery after kube-apiserver came back: every claim and XWidget Ready at its desired size %s later", time.Since(started).Round(100*time.Millisecond))
	checkOneWidgetEach(t, ns, xrs)
	for _, p := range crossplanePods(t, kc) {
		if n := restartCount(p); n > restarts[p.Name] {
			t.Logf("pod %s restarted %d times while kube-apiserver was away (kubelet restarted it)", p.Name, n-restarts[p.Name])
		}
	}
	waitProviderPods(t, kc, 2)
}

// crossplanePods lists the pods in Crossplane's namespace.
func crossplanePods(t *testing.T, kc client.Client) []*corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := kc.List(t.Context(), pods, client.InNamespace(cluster.CrossplaneNamespace)); err != nil {
		t.Fatal(err)
	}
	out := make([]*corev1.Pod, 0, len(pods.Items))
	for i := range pods.Items {
		out = append(out, &pods.Items[i])
	}
	return out
}
