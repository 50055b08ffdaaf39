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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

const (
	token   = "node-e2e-token-0123456789abcdef"
	project = "team-a"
)

// TestPlatformOnARealNode installs the platform the way a platform team
// does on a real cluster and sees the example XWidget and WidgetClaim go
// Ready, with every pod run by kubelet on the node.
func TestPlatformOnARealNode(t *testing.T) {
	tools := cluster.Require(t)
	crossplane, crank := os.Getenv("CROSSPLANE_BIN"), os.Getenv("CRANK_BIN")
	if crossplane == "" || crank == "" {
		t.Fatal("CROSSPLANE_BIN or CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	root, err := platform.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := platform.FindPackages(root)
	if err != nil {
		t.Fatalf("%v (make e2e-node builds them)", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir, err := os.MkdirTemp("", "wnode-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster directory %s (kept when the test fails)", dir)
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cannot stop the cluster: %v", err)
		}
		if left := c.Leftovers(); len(left) > 0 {
			t.Errorf("the cluster left behind:\n%s", strings.Join(left, "\n"))
		}
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	if _, err := c.InstallCrossplane(ctx, cluster.Crossplane{Bin: crossplane, Version: "v2.4.2", Args: platform.CoreArgs()}); err != nil {
		t.Fatal(err)
	}
	api := startWidgetAPI(t, c.NodeIP(), filepath.Join(dir, "widgetapi"))
	if err := platform.InstallInto(ctx, c, api, platform.Options{
		Root: root, Packages: pkgs, Crank: crank, Token: token, Log: log,
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("platform installed %s after the cluster started", time.Since(begin).Round(time.Second))

	var objs []*unstructured.Unstructured
	for _, f := range []string{"namespaced/xr.yaml", "legacy/claim.yaml"} {
		o, err := platform.ReadObjects(filepath.Join(root, "examples", "composition", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := platform.EnsureNamespace(ctx, c.Client(), o[0].GetNamespace()); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	applied := time.Now()
	if err := platform.Create(ctx, c.Client(), objs...); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		wait.For(t, 3*time.Minute, o.GetKind()+" "+platform.Name(o)+" Ready", func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Client().Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
				return err
			}
			if platform.GetCondition(u, "Ready").Status != "True" || platform.GetCondition(u, "Synced").Status != "True" {
				return fmt.Errorf("%s", platform.StatusLine(u))
			}
			return nil
		})
		t.Logf("%s %s Ready %s after it was applied", o.GetKind(), platform.Name(o), time.Since(applied).Round(100*time.Millisecond))
	}

	// Every pod runs on the node: CoreDNS, core, the RBAC manager, the
	// provider's replicas and the function.
	pods := &corev1.PodList{}
	if err := c.Client().List(ctx, pods); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"coredns": false, "crossplane": false, "crossplane-rbac-manager": false, platform.ProviderName: false, platform.FunctionName: false}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s %s on %s, IP %s", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
		if p.Spec.NodeName != c.Node.Name() || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s/%s: %s on %q, want Running on %s", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, c.Node.Name())
		}
		for prefix := range want {
			if strings.HasPrefix(p.Name, prefix+"-") && !strings.HasPrefix(strings.TrimPrefix(p.Name, prefix+"-"), "rbac-manager") {
				want[prefix] = true
			}
		}
	}
	for prefix, seen := range want {
		if !seen {
			t.Errorf("no pod %s-* runs", prefix)
		}
	}
}

// startWidgetAPI serves the reference Widget API on the node's address,
// where the provider's pods reach it, and returns its URL.
func startWidgetAPI(t *testing.T, ip, dataDir string) string {
	t.Helper()
	s, err := server.New(server.Options{
		DataDir:        dataDir,
		Tokens:         map[string]string{token: project},
		ProvisionDelay: time.Second,
		ResizeDelay:    time.Second,
		DeleteDelay:    time.Second,
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs := s.HTTPServer()
	go func() { _ = hs.Serve(s.LimitListener(l)) }()
	t.Cleanup(func() {
		s.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = s.Close()
	})
	return "http://" + l.Addr().String()
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
