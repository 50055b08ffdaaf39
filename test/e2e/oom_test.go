//go:build linux

package e2e_test

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

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
)

// TestLeaderOOMKilled has the kernel kill the leading provider container
// for want of memory while claims and XWidgets are being created: its
// memory cgroup's limit is lowered to just above what it uses (the
// example's 512Mi is far above what a provider with ten widgets needs), so
// its next allocations exceed it. kubelet reports OOMKilled and restarts
// the container with the pod's own limit, another replica takes over, and
// every claim and XWidget goes Ready with one widget each.
func TestLeaderOOMKilled(t *testing.T) {
	needsNode(t, "reads the leader's memory cgroup")
	s := newScenario(t, false)
	leader := s.leader()
	restarts := restartCount(leader.Object())
	cg, err := leader.ContainerCgroup(s.ctx, "memory", cluster.RuntimeContainer)
	if err != nil {
		t.Fatal(err)
	}

	squeezed := s.squeeze(cg, 1<<20)
	t.Logf("lowered %s's memory limit to %d bytes (1 MiB above its use)", leader.Name(), squeezed)
	start := time.Now()
	// Work for the leader: its caches and heap grow with these.
	xrs := s.createDuringFirstCommits(40)

	var reason string
	s.eventually("the kernel to OOM-kill the leader and kubelet to restart it", func() error {
		p, err := leader.Current(s.ctx)
		if err != nil {
			return err
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == cluster.RuntimeContainer && st.LastTerminationState.Terminated != nil {
				reason = st.LastTerminationState.Terminated.Reason
			}
		}
		if restartCount(p) <= restarts {
			// Keep the limit just above what it uses, as that falls
			// after a garbage collection, until an allocation exceeds it.
			_, _ = lower(cg, 512<<10)
			return fmt.Errorf("not restarted yet (memory.failcnt %s)", readFile(filepath.Join(cg, "memory.failcnt")))
		}
		return nil
	})
	t.Logf("MEASURED the leader was restarted %s after its limit was lowered; last termination reason %q", time.Since(start).Round(100*time.Millisecond), reason)
	if reason != "OOMKilled" {
		t.Errorf("the container's last termination reason: got %q, want OOMKilled", reason)
	}
	for _, xr := range xrs {
		s.waitReady(xr)
	}
	s.checkOneWidgetEach(xrs)
	s.waitProviderPods(2)
}

// squeeze lowers the cgroup's memory limit to headroom above its usage and
// returns the limit. The kernel refuses (EBUSY) a limit it cannot reclaim
// down to; it then tries again with the new usage.
func (s *scenario) squeeze(cg string, headroom int64) int64 {
	s.t.Helper()
	var limit int64
	s.eventuallyWithin(30*time.Second, "a memory limit just above the container's use", func() error {
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
