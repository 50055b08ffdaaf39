package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// failoverXRs is how many claims and XWidgets each failover scenario
// creates while it takes the leader away.
const failoverXRs = 10

// TestLeaderPodDeleted deletes the leading provider pod while claims and
// XWidgets are being created, as a node drain or `kubectl delete pod` does:
// kubelet stops it gracefully, it hands its lease over at once, the
// Deployment replaces it, and every claim and XWidget goes Ready with one
// widget each.
func TestLeaderPodDeleted(t *testing.T) {
	c := suite(t)
	kc := c.Client()
	ns := "node-pod-deleted"
	ensureNamespace(t, kc, ns)
	leader := leaderPod(t, kc)
	holder := leaseHolder(t.Context(), kc)
	xrs := createWhileFirstWidgetsCommit(t, kc, ns)

	deleted := time.Now()
	if err := kc.Delete(t.Context(), leader); err != nil {
		t.Fatalf("cannot delete the leader %s: %v", leader.Name, err)
	}
	took := waitNewLeader(t, kc, holder, deleted)
	t.Logf("MEASURED leader pod deleted: another replica took the lease %s after the delete (graceful stop; lease duration 15s)", took.Round(100*time.Millisecond))
	waitReady(t, kc, 3*time.Minute, xrs...)
	t.Logf("MEASURED all %d claims and XWidgets Ready %s after the leader's pod was deleted", len(xrs), time.Since(deleted).Round(100*time.Millisecond))
	checkOneWidgetEach(t, ns, xrs)
	waitProviderPods(t, kc, 2)
}

// TestLeaderContainerKilled kills (SIGKILL) every process of the leading
// provider container while claims and XWidgets are being created: the
// lease expires and another replica takes it, kubelet restarts the
// container in the same pod, and every claim and XWidget goes Ready with
// one widget each.
func TestLeaderContainerKilled(t *testing.T) {
	c := suite(t)
	kc := c.Client()
	ns := "node-container-killed"
	ensureNamespace(t, kc, ns)
	leader := leaderPod(t, kc)
	holder := leaseHolder(t.Context(), kc)
	restarts := restartCount(leader)
	cg := containerCgroup(t, c, leader)
	xrs := createWhileFirstWidgetsCommit(t, kc, ns)

	killed := time.Now()
	pids := killCgroup(t, cg)
	t.Logf("SIGKILLed the leader %s's container (%d processes)", leader.Name, pids)
	took := waitNewLeader(t, kc, holder, killed)
	t.Logf("MEASURED leader container killed: another replica took the lease %s after the kill (lease duration 15s)", took.Round(100*time.Millisecond))
	waitReady(t, kc, 3*time.Minute, xrs...)
	t.Logf("MEASURED all %d claims and XWidgets Ready %s after the leader's container was killed", len(xrs), time.Since(killed).Round(100*time.Millisecond))
	checkOneWidgetEach(t, ns, xrs)
	wait.For(t, 2*time.Minute, "kubelet to restart the killed container", func() error {
		p := &corev1.Pod{}
		if err := kc.Get(t.Context(), client.ObjectKeyFromObject(leader), p); err != nil {
			return err
		}
		if n := restartCount(p); n <= restarts || !ready(p) {
			return fmt.Errorf("restarts %d (were %d), ready %t", n, restarts, ready(p))
		}
		return nil
	})
}

// createWhileFirstWidgetsCommit creates failoverXRs claims and XWidgets in
// ns with concurrent clients and returns them once the first widgets
// exist in the Widget API: the provider is mid-way.
func createWhileFirstWidgetsCommit(t *testing.T, kc client.Client, ns string) []*unstructured.Unstructured {
	t.Helper()
	return createXRs(t, kc, ns, failoverXRs)
}

// createXRs creates n claims and XWidgets in ns with concurrent clients
// and returns them once the first widgets exist in the Widget API.
func createXRs(t *testing.T, kc client.Client, ns string, n int) []*unstructured.Unstructured {
	t.Helper()
	xrs := make([]*unstructured.Unstructured, 0, n)
	for i := range n {
		xrs = append(xrs, xr(i%2 == 0, ns, fmt.Sprintf("failover-%02d", i), ns))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(xrs))
	for i, x := range xrs {
		wg.Go(func() { errs[i] = kc.Create(t.Context(), x) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("cannot create the claims and XWidgets: %v", err)
		}
	}
	wait.For(t, 2*time.Minute, "the first widgets in the Widget API", func() error {
		ws, err := scenarioWidgets(t.Context(), ns)
		if err != nil {
			return err
		}
		if len(ws) < 2 {
			return fmt.Errorf("%d widgets", len(ws))
		}
		return nil
	})
	return xrs
}

// waitNewLeader waits until someone other than holder holds the lease and
// returns how long after since that was.
func waitNewLeader(t *testing.T, kc client.Client, holder string, since time.Time) time.Duration {
	t.Helper()
	var took time.Duration
	wait.For(t, 2*time.Minute, "another replica to take the lease", func() error {
		if h := leaseHolder(t.Context(), kc); h == "" || h == holder {
			return fmt.Errorf("held by %q", h)
		}
		took = time.Since(since)
		return nil
	})
	return took
}

// checkOneWidgetEach checks the Widget API holds exactly one widget per
// claim and XWidget of the scenario: none created twice by a replica that
// took over.
func checkOneWidgetEach(t *testing.T, scenario string, xrs []*unstructured.Unstructured) {
	t.Helper()
	ws, err := scenarioWidgets(t.Context(), scenario)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != len(xrs) {
		names := make([]string, 0, len(ws))
		for _, w := range ws {
			names = append(names, w.Name)
		}
		t.Errorf("%d widgets in the Widget API for %d claims and XWidgets: %s", len(ws), len(xrs), strings.Join(names, ", "))
	}
}

// waitProviderPods waits until n provider pods are ready.
func waitProviderPods(t *testing.T, kc client.Client, n int) {
	t.Helper()
	wait.For(t, 2*time.Minute, strconv.Itoa(n)+" ready provider-widget pods", func() error {
		pods := providerPods(t, kc)
		got := 0
		for _, p := range pods {
			if ready(p) && p.DeletionTimestamp == nil {
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%d of %d pods ready", got, len(pods))
		}
		return nil
	})
}

// providerPods lists provider-widget's pods.
func providerPods(t *testing.T, kc client.Client) []*corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := kc.List(t.Context(), pods, client.InNamespace(cluster.CrossplaneNamespace)); err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range pods.Items {
		if strings.HasPrefix(pods.Items[i].Name, platform.ProviderName+"-") {
			out = append(out, &pods.Items[i])
		}
	}
	return out
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// containerCgroup is the memory cgroup of the pod's package-runtime
// container.
func containerCgroup(t *testing.T, c *cluster.Cluster, p *corev1.Pod) string {
	t.Helper()
	for _, s := range p.Status.ContainerStatuses {
		if s.Name != "package-runtime" {
			continue
		}
		_, id, _ := strings.Cut(s.ContainerID, "://")
		dir, err := c.ContainerCgroup("memory", id)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Fatalf("pod %s has no package-runtime container status", p.Name)
	return ""
}

// killCgroup SIGKILLs every process in the cgroup and returns how many.
func killCgroup(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(b))
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Logf("kill %d: %v", pid, err)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("no process in %s", dir)
	}
	return len(pids)
}
