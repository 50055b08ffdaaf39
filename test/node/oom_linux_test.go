package node_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// TestLeaderOOMKilled has the kernel kill the leading provider container
// for want of memory while claims and XWidgets are being created: its
// memory cgroup's limit is lowered to just above what it uses (the
// example's 512Mi is far above what a provider with ten widgets needs), so
// its next allocations exceed it. kubelet reports OOMKilled and restarts
// the container with the pod's own limit, another replica takes over, and
// every claim and XWidget goes Ready with one widget each.
func TestLeaderOOMKilled(t *testing.T) {
	c := suite(t)
	kc := c.Client()
	ns := "node-oom-killed"
	ensureNamespace(t, kc, ns)
	leader := leaderPod(t, kc)
	restarts := restartCount(leader)
	cg := containerCgroup(t, c, leader)

	squeezed := squeeze(t, cg, 1<<20)
	t.Logf("lowered %s's memory limit to %d bytes (1 MiB above its use)", leader.Name, squeezed)
	start := time.Now()
	// Work for the leader: its caches and heap grow with these.
	xrs := createXRs(t, kc, ns, 4*failoverXRs)

	var reason string
	wait.For(t, 3*time.Minute, "the kernel to OOM-kill the leader and kubelet to restart it", func() error {
		p := &corev1.Pod{}
		if err := kc.Get(t.Context(), client.ObjectKeyFromObject(leader), p); err != nil {
			return err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "package-runtime" && s.LastTerminationState.Terminated != nil {
				reason = s.LastTerminationState.Terminated.Reason
			}
		}
		if restartCount(p) <= restarts {
			// Keep the limit just above what it uses, as that falls
			// after a garbage collection, until an allocation exceeds it.
			lower(cg, 512<<10)
			return fmt.Errorf("not restarted yet (memory.failcnt %s)", readFile(filepath.Join(cg, "memory.failcnt")))
		}
		return nil
	})
	t.Logf("MEASURED the leader was restarted %s after its limit was lowered; last termination reason %q", time.Since(start).Round(100*time.Millisecond), reason)
	if reason != "OOMKilled" {
		t.Errorf("the container's last termination reason: got %q, want OOMKilled", reason)
	}
	waitReady(t, kc, 3*time.Minute, xrs...)
	checkOneWidgetEach(t, ns, xrs)
	waitProviderPods(t, kc, 2)
}

// squeeze lowers the cgroup's memory limit to headroom above its usage and
// returns the limit. The kernel refuses (EBUSY) a limit it cannot reclaim
// down to; it then tries again with the new usage.
func squeeze(t *testing.T, cg string, headroom int64) int64 {
	t.Helper()
	var limit int64
	wait.For(t, 30*time.Second, "a memory limit just above the container's use", func() error {
		var err error
		limit, err = lower(cg, headroom)
		return err
	})
	return limit
}

// lower sets the cgroup's memory limit to headroom above its usage, if that
// is below the limit it has, and returns the limit it has then.
func lower(cg string, headroom int64) (int64, error) {
	usage, err := strconv.ParseInt(readFile(filepath.Join(cg, "memory.usage_in_bytes")), 10, 64)
	if err != nil {
		return 0, err
	}
	limit, err := strconv.ParseInt(readFile(filepath.Join(cg, "memory.limit_in_bytes")), 10, 64)
	if err != nil {
		return 0, err
	}
	if usage+headroom >= limit {
		return limit, nil
	}
	err = os.WriteFile(filepath.Join(cg, "memory.limit_in_bytes"), []byte(strconv.FormatInt(usage+headroom, 10)), 0o600)
	if errors.Is(err, syscall.EBUSY) {
		return limit, fmt.Errorf("the kernel refused %d: %w", usage+headroom, err)
	}
	return usage + headroom, err
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}
