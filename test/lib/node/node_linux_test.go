package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/node"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// podCIDR is the smoke test's pod range (the node's bridge).
const podCIDR = "10.215.0.0/24"

// TestNodeRunsAPod starts etcd, kube-apiserver and kube-controller-manager,
// then a real node (containerd, runc, kubelet, a CNI bridge), runs a pod
// with a memory limit on it, and checks that tearing the node down leaves
// nothing behind.
func TestNodeRunsAPod(t *testing.T) {
	all := cluster.Require(t)
	tools, kcmBin := all.Node, all.ControllerManager

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Short: containerd's and the shims' socket paths must fit 107 bytes.
	dir, err := os.MkdirTemp("", "wnode-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node directory %s (kept when the test fails)", dir)
	cleanupDir := func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	}
	t.Cleanup(cleanupDir)

	// Control plane: the project's one way to start an API server.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	env, err := kube.Start(kube.Options{
		EtcdDataDir: filepath.Join(dir, "etcd"),
		Kubeconfig:  kubeconfig,
		CertDir:     filepath.Join(dir, "apiserver"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("cannot stop etcd and kube-apiserver: %v", err)
		}
	})
	c := env.Client
	startKCM(t, kcmBin, dir, kubeconfig, env.Config.CAData, log)

	img, err := node.BuildPauseImage(ctx, filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	n, err := node.Start(ctx, node.Options{
		Tools:      tools,
		Dir:        filepath.Join(dir, "node"),
		Kubeconfig: kubeconfig,
		PodCIDR:    podCIDR,
		Images:     []string{img},
		Log:        log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopAndCheck(t, n) })

	ready := waitNodeReady(t, c, n)
	t.Logf("Node %s Ready after %s (containerd and kubelet started %s ago)", n.Name(), ready.Round(time.Second), time.Since(start).Round(time.Second))

	// kube-controller-manager: the ServiceAccount and the root CA a pod's
	// token volume needs.
	wait.For(t, time.Minute, "ServiceAccount default/default and ConfigMap default/kube-root-ca.crt", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
			return err
		}
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{})
	})
	t.Logf("kube-controller-manager made ServiceAccount default/default and ConfigMap default/kube-root-ca.crt")

	pod := pausePod(n.Name())
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("cannot create pod: %v", err)
	}
	running := wait.For(t, 2*time.Minute, "pod default/pause Running", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %q, conditions %v, containers %v", pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
		}
		return nil
	})
	_, pods, _ := net.ParseCIDR(podCIDR)
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !pods.Contains(ip) {
		t.Fatalf("pod IP %q is not in the bridge's range %s", pod.Status.PodIP, podCIDR)
	}
	t.Logf("pod default/pause Running after %s with IP %s (bridge range %s)", running.Round(time.Second), pod.Status.PodIP, podCIDR)

	limit := memoryLimit(t, n, pod)
	if limit != 64<<20 {
		t.Errorf("memory.limit_in_bytes of the container's cgroup: got %d, want %d (64Mi)", limit, 64<<20)
	}
	t.Logf("container cgroup memory.limit_in_bytes = %d (64Mi)", limit)

	logFile := filepath.Join(n.PodLogsDir(), fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), "pause", "0.log")
	wait.For(t, 30*time.Second, "the container's log line", func() error {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "pause: started") {
			return fmt.Errorf("%s: %q", logFile, b)
		}
		return nil
	})
	t.Logf("container log has %q", "pause: started")

	// kubelet stops the pod, tears its sandbox (and CNI address) down and
	// only then lets the Pod object go.
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatalf("cannot delete pod: %v", err)
	}
	gone := wait.For(t, 2*time.Minute, "kubelet to delete pod default/pause", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if err == nil {
			return fmt.Errorf("pod still exists")
		}
		return client.IgnoreNotFound(err)
	})
	t.Logf("pod deleted by kubelet after %s", gone.Round(time.Second))
}

// startKCM runs kube-controller-manager with the controllers pods need
// (ServiceAccounts, the kube-root-ca.crt ConfigMap) and the garbage
// collector, until the test ends.
func startKCM(t *testing.T, bin, dir, kubeconfig string, ca []byte, log *slog.Logger) {
	t.Helper()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	p := proc.New("kube-controller-manager", proc.Command{
		Path: bin,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=serviceaccount-controller,root-ca-certificate-publisher-controller,garbage-collector-controller,namespace-controller",
			"--root-ca-file=" + caFile,
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		},
	}, os.Environ(), filepath.Join(dir, "kube-controller-manager.log"), log)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("cannot stop kube-controller-manager: %v", err)
		}
	})
}

// waitNodeReady waits until the Node reports Ready and returns how long
// that took; it fails at once when kubelet exits.
func waitNodeReady(t *testing.T, c client.Client, n *node.Node) time.Duration {
	t.Helper()
	return wait.For(t, 3*time.Minute, "Node "+n.Name()+" Ready", func() error {
		select {
		case <-n.KubeletExited():
			t.Fatalf("kubelet exited; see %s", n.KubeletLog())
		default:
		}
		no := &corev1.Node{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: n.Name()}, no); err != nil {
			return err
		}
		for _, cond := range no.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		return fmt.Errorf("no Ready condition yet")
	})
}

// pausePod is a pod of the pause image bound to node (no scheduler), with
// requests equal to limits (Guaranteed QoS).
func pausePod(node string) *corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("64Mi"),
		corev1.ResourceCPU:    resource.MustParse("100m"),
	}
	grace := int64(5)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pause"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "pause",
				Image:           "widget.local/node/pause:v1",
				ImagePullPolicy: corev1.PullNever,
				Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
}

// memoryLimit reads memory.limit_in_bytes of the pod's container's cgroup:
// <cgroup root>/kubepods/pod<uid>/<container id> for a Guaranteed pod.
func memoryLimit(t *testing.T, n *node.Node, pod *corev1.Pod) int64 {
	t.Helper()
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("want one container status, got %v", pod.Status.ContainerStatuses)
	}
	id := pod.Status.ContainerStatuses[0].ContainerID
	id = id[strings.Index(id, "://")+3:]
	f := filepath.Join("/sys/fs/cgroup/memory", n.CgroupRoot(), "kubepods", "pod"+string(pod.UID), id, "memory.limit_in_bytes")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("cannot read the container's memory limit: %v", err)
	}
	var v int64
	if _, err := fmt.Sscan(string(b), &v); err != nil {
		t.Fatalf("cannot parse %s: %v", f, err)
	}
	t.Logf("cgroup %s", strings.TrimPrefix(filepath.Dir(f), "/sys/fs/cgroup/memory"))
	return v
}

// stopAndCheck tears the node down and fails the test for anything left.
func stopAndCheck(t *testing.T, n *node.Node) {
	t.Helper()
	start := time.Now()
	if err := n.Stop(); err != nil {
		t.Errorf("%v", err)
	}
	left := n.Leftovers()
	for _, l := range left {
		t.Errorf("left behind: %s", l)
	}
	if len(left) == 0 {
		t.Logf("node torn down in %s; nothing left: no containerd, kubelet, shim or container process, no mount under its directory, bridge and veths deleted, cgroups %s removed, nothing new in %v, sysctls %v as before",
			time.Since(start).Round(100*time.Millisecond), n.CgroupRoot(), node.MachinePaths, node.Sysctls)
	}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
