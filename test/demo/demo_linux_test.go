package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestDemo runs `make demo`'s program as a user does (the machine runs one
// node at a time: make test runs it before the e2e suite): it waits for the
// example XWidget and WidgetClaim to be Ready, runs the `kubectl get pods
// -A -o wide` the demo suggests (core, the RBAC manager, CoreDNS, the
// provider and the function Running on the node) and a `kubectl logs`
// (kube-apiserver reaching kubelet), runs every command the user pages mark
// <!-- demo: run --> (runDocCommands), then presses Ctrl-C and checks
// everything is torn down.
func TestDemo(t *testing.T) {
	cluster.Require(t)
	kubectl := os.Getenv("KUBECTL_BIN")
	if kubectl == "" {
		t.Fatal("KUBECTL_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	root, err := platform.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./test/demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the demo: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "wdemo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	demo := exec.CommandContext(ctx, bin, "--dir", dir)
	demo.Dir = root
	out, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	demo.Stderr = demo.Stdout
	start := time.Now()
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	// The demo's lines, and the KUBECONFIG it tells the reader to export.
	kubeconfig := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(out)
		ready := false
		for sc.Scan() {
			line := sc.Text()
			t.Log("demo: " + line)
			if strings.Contains(line, " are Ready (") {
				ready = true
			}
			if kc, ok := strings.CutPrefix(strings.TrimSpace(line), "export KUBECONFIG="); ok && ready {
				kubeconfig <- kc
			}
		}
	}()
	var kc string
	select {
	case kc = <-kubeconfig:
	case <-exited:
		_ = demo.Wait()
		t.Fatalf("the demo exited before the examples were Ready")
	case <-ctx.Done():
		t.Fatalf("the examples were not Ready within 10m")
	}
	t.Logf("MEASURED make demo's program: the example XWidget and WidgetClaim Ready %s after it started (tools and packages built)", time.Since(start).Round(time.Second))

	get := exec.CommandContext(ctx, kubectl, "get", "pods", "-A", "-o", "wide")
	get.Env = append(os.Environ(), "KUBECONFIG="+kc)
	pods, err := get.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get pods -A -o wide: %v\n%s", err, pods)
	}
	t.Logf("kubectl get pods -A -o wide:\n%s", pods)
	for _, want := range []string{"coredns-", "crossplane-", "crossplane-rbac-manager-", platform.ProviderName + "-", platform.FunctionName + "-"} {
		found := false
		for _, l := range strings.Split(string(pods), "\n") {
			f := strings.Fields(l)
			if len(f) >= 8 && strings.HasPrefix(f[1], want) && f[3] == "Running" && f[7] == "widget-node" {
				found = true
			}
		}
		if !found {
			t.Errorf("no pod %s* Running on widget-node", want)
		}
	}

	// kube-apiserver reaches kubelet for logs, as docs/troubleshooting.md
	// tells the reader to use them.
	logs := exec.CommandContext(ctx, kubectl, "logs", "-n", "kube-system", "deploy/coredns", "--tail=3")
	logs.Env = get.Env
	if out, err := logs.CombinedOutput(); err != nil {
		t.Errorf("kubectl logs -n kube-system deploy/coredns: %v\n%s", err, out)
	}

	runDocCommands(ctx, t, root, kc, kubectl)

	if err := demo.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("the demo did not exit within 2m of Ctrl-C")
	}
	if err := demo.Wait(); err != nil {
		t.Errorf("the demo exited with %v after Ctrl-C, want 0", err)
	}
	if _, err := os.Stat("/sys/class/net/wcluster0"); err == nil {
		t.Errorf("the demo left its bridge wcluster0 behind")
	}
}
