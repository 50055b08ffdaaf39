package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
)

// start starts a cluster for t, or skips t when the machine or the tools
// are not there; t's cleanup stops it and checks it left nothing behind.
func start(t *testing.T) *cluster.Cluster {
	t.Helper()
	tools := cluster.Require(t)
	dir, err := os.MkdirTemp("", "wcl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster directory %s (kept when the test fails)", dir)
	// Long enough to wait for another node on this machine (make test runs
	// the real-node suite beside this package).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cannot stop the cluster: %v", err)
		}
		if left := c.Leftovers(); len(left) > 0 {
			t.Errorf("the cluster left behind:\n%v", left)
		}
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}

// TestKilledClusterIsReclaimed kills a process running a cluster (with
// SIGKILL: no Stop runs; its shims and containers outlive it, as do its
// mounts, cgroups, rules and bridge) and starts a cluster again: the new
// one tears down what the killed one left, and itself leaves nothing.
func TestKilledClusterIsReclaimed(t *testing.T) {
	if os.Getenv("WIDGET_CLUSTER_CHILD") == "1" {
		c := start(t)
		fmt.Printf("CLUSTER READY %s\n", c.Dir())
		time.Sleep(10 * time.Minute) // until killed
		return
	}
	cluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledClusterIsReclaimed$", "-test.v")
	child.Env = append(os.Environ(), "WIDGET_CLUSTER_CHILD=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if dir, ok := strings.CutPrefix(sc.Text(), "CLUSTER READY "); ok {
				ready <- dir
			}
		}
		close(ready)
	}()
	dir, ok := <-ready
	if !ok {
		_ = child.Wait()
		t.Fatal("the child's cluster did not start")
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // its logs stay until the test ends
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if _, err := os.Stat("/sys/class/net/wcluster0"); err != nil {
		t.Fatalf("the killed cluster's bridge is gone already (%v): nothing left to reclaim", err)
	}
	sockets := func() []string { e, _ := os.ReadDir("/run/containerd/s"); return dirNames(e) }
	killed := sockets()
	c := start(t)
	t.Logf("a new cluster runs at %s after reclaiming the killed one's leftovers", c.NodeIP())
	for _, s := range killed {
		if slices.Contains(sockets(), s) {
			t.Errorf("the killed cluster's shim socket /run/containerd/s/%s is still there", s)
		}
	}
}

func dirNames(es []os.DirEntry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
