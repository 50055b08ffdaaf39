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

// start starts a cluster of n nodes for t, or skips t when the machine or
// the tools are not there; t's cleanup stops it and checks it left nothing
// behind.
func start(t *testing.T, n int) *cluster.Cluster {
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
	c, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log, Nodes: n})
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
// mounts, cgroups, rules and bridge) and reclaims what it left, as the next
// Start does before it starts (the e2e suite, make demo and the benches
// start a cluster that way every run): nothing of the killed one is left.
func TestKilledClusterIsReclaimed(t *testing.T) {
	if os.Getenv("WIDGET_CLUSTER_CHILD") == "1" {
		// Two nodes: the record names both, and both are torn down.
		c := start(t, 2)
		fmt.Printf("CLUSTER READY %s\n", c.Dir())
		time.Sleep(10 * time.Minute) // until killed
		return
	}
	tools := cluster.Require(t)
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
	for _, br := range []string{"wcluster0", "wcluster0-2"} {
		if _, err := os.Stat("/sys/class/net/" + br); err != nil {
			t.Fatalf("the killed cluster's bridge %s is gone already (%v): nothing left to reclaim", br, err)
		}
	}
	sockets := func() []string { e, _ := os.ReadDir("/run/containerd/s"); return dirNames(e) }
	killed := sockets()
	rec, err := cluster.ReclaimKilled(ctx, cluster.Options{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil || rec.Dir != dir && !strings.HasPrefix(rec.Dir, dir+"/") {
		t.Fatalf("the killed run on record: %+v, want the one in %s", rec, dir)
	}
	if len(rec.Nodes) != 1 {
		t.Errorf("the killed run's record names %d further nodes, want 1: %+v", len(rec.Nodes), rec)
	}
	if left := cluster.LeftoversOf(cluster.Options{Tools: tools}, *rec); len(left) > 0 {
		t.Errorf("the killed cluster left behind, after reclaiming:\n%v", left)
	}
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
