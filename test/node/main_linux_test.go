// Package node_test runs the platform on a real one-node cluster
// (test/lib/cluster): Crossplane installed from its Helm chart, the
// packages installed by its package manager from the cluster's registry and
// run by kubelet, the reference Widget API on the node's address. make test
// and make e2e-node run it (as root; cluster.Require).
package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

const (
	token   = "node-e2e-token-0123456789abcdef"
	project = "team-a"

	// identityAudience is the audience of the provider's projected token
	// (examples/runtime), and identityProject the project its identity
	// acts in.
	identityAudience = "widget-api"
	identityProject  = "node-identity"

	xwidgetAPIVersion = "platform.widgetco.io/v1alpha1"
	claimAPIVersion   = "legacy.platform.widgetco.io/v1alpha1"
	// labelScenario marks the widgets a scenario asks for.
	labelScenario = "node-scenario"
)

// The suite's cluster, with the platform installed: set up by the first
// test that needs it, torn down after the last.
var (
	suitePassed bool
	setupOnce   sync.Once
	setupErr    error
	teardown    []func()
	env         struct {
		c       *cluster.Cluster
		api     *widgetapi.Client
		apiURL  string
		dir     string
		begin   time.Time
		rootDir string
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env.c != nil && setupErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := checkSecrets(ctx); err != nil {
			fmt.Println(err)
			code = 1
		}
		cancel()
	}
	suitePassed = code == 0
	for i := len(teardown) - 1; i >= 0; i-- {
		teardown[i]()
	}
	os.Exit(code)
}

// suite returns the cluster with the platform installed, setting it up on
// first use; it fails t when that failed.
func suite(t *testing.T) *cluster.Cluster {
	t.Helper()
	tools := cluster.Require(t)
	setupOnce.Do(func() { setupErr = setup(tools) })
	if setupErr != nil {
		t.Fatalf("cannot set up the real-node suite: %v", setupErr)
	}
	return env.c
}

func setup(tools cluster.Tools) error {
	crossplane, crank := os.Getenv("CROSSPLANE_BIN"), os.Getenv("CRANK_BIN")
	if crossplane == "" || crank == "" {
		return fmt.Errorf("CROSSPLANE_BIN or CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	root, err := platform.FindRoot()
	if err != nil {
		return err
	}
	pkgs, err := platform.FindPackages(root)
	if err != nil {
		return fmt.Errorf("%w (make e2e-node builds them)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir, err := os.MkdirTemp("", "wnode-e2e-")
	if err != nil {
		return err
	}
	env.dir, env.rootDir, env.begin = dir, root, time.Now()
	log.Info("Real-node suite", "dir", dir)
	c, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log})
	if err != nil {
		return err
	}
	env.c = c
	teardown = append(teardown, func() {
		err := c.Stop()
		if err != nil {
			fmt.Printf("cannot stop the cluster: %v\n", err)
		}
		left := c.Leftovers()
		if len(left) > 0 {
			fmt.Printf("the cluster left behind:\n%s\n", strings.Join(left, "\n"))
		}
		if err == nil && len(left) == 0 && suitePassed {
			_ = os.RemoveAll(dir)
			return
		}
		fmt.Printf("the suite's directory %s is kept\n", dir)
	})
	if _, err := c.InstallCrossplane(ctx, cluster.Crossplane{Bin: crossplane, Version: "v2.4.2", Args: platform.CoreArgs()}); err != nil {
		return err
	}
	// Workload identity: the Widget API trusts kube-apiserver's
	// ServiceAccount tokens for its audience, and maps Crossplane's
	// namespace (the provider's pods) to a project of its own.
	ids, err := harness.TrustCluster(ctx, c.Client(), c.Kube.Config, filepath.Join(dir, "kube-apiserver-ca.crt"), harness.ClusterIdentity{
		Audience: identityAudience,
		Subjects: []idtoken.Subject{{Subject: "system:serviceaccount:" + cluster.CrossplaneNamespace + ":*", Project: identityProject, Role: idtoken.RoleEditor}},
	})
	if err != nil {
		return err
	}
	api, err := harness.StartWidgetAPI(server.Options{
		Tokens:         map[string]string{token: project},
		IdentityTokens: ids,
		ProvisionDelay: time.Second,
		ResizeDelay:    time.Second,
		DeleteDelay:    time.Second,
	}, dir, net.JoinHostPort(c.NodeIP(), "0"))
	if err != nil {
		return err
	}
	teardown = append(teardown, func() { _ = api.Close() })
	env.apiURL = api.URL
	if env.api, err = widgetapi.New(env.apiURL, widgetapi.WithToken(token)); err != nil {
		return err
	}
	return platform.InstallInto(ctx, c, env.apiURL, platform.Options{
		Root: root, Packages: pkgs, Crank: crank, Token: token, Log: log,
		// A lease of 15s rather than 60s, as in the harness's suite: the
		// scenarios that kill the leader wait for it to expire.
		ProviderArgs: []string{"--debug", "--lease-duration=15s", "--renew-deadline=10s"},
	})
}

// xr returns an XWidget (or, with claim, a WidgetClaim) in namespace ns
// whose widget carries the scenario's label.
func xr(claim bool, ns, name, scenario string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"size": "small", "keys": int64(1),
		"labels": map[string]any{"team": "payments", labelScenario: scenario},
	}}}
	u.SetAPIVersion(xwidgetAPIVersion)
	u.SetKind("XWidget")
	if claim {
		u.SetAPIVersion(claimAPIVersion)
		u.SetKind("WidgetClaim")
	}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// waitReady waits until each object is Synced and Ready.
func waitReady(t *testing.T, c client.Client, timeout time.Duration, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		wait.For(t, timeout, o.GetKind()+" "+platform.Name(o)+" Ready", func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GroupVersionKind())
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(o), u); err != nil {
				return err
			}
			if platform.GetCondition(u, "Ready").Status != "True" || platform.GetCondition(u, "Synced").Status != "True" {
				return fmt.Errorf("%s", platform.StatusLine(u))
			}
			return nil
		})
	}
}

// scenarioWidgets lists the widgets labelled for scenario.
func scenarioWidgets(ctx context.Context, scenario string) ([]widgetapi.Widget, error) {
	var out []widgetapi.Widget
	o := widgetapi.ListWidgetsOptions{Labels: map[string]string{labelScenario: scenario}}
	for {
		l, err := env.api.ListWidgets(ctx, o)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.NextPageToken == "" {
			return out, nil
		}
		o.PageToken = l.NextPageToken
	}
}

// leaseHolder is the identity holding provider-widget's lease.
func leaseHolder(ctx context.Context, c client.Client) string {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: platform.LeaseName}, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaderPod is the provider pod holding the lease (its identity is
// <pod name>_<uuid>).
func leaderPod(t *testing.T, c client.Client) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	wait.For(t, time.Minute, "a provider-widget pod holding the lease", func() error {
		holder := leaseHolder(t.Context(), c)
		name, _, ok := strings.Cut(holder, "_")
		if !ok {
			return fmt.Errorf("lease holder %q", holder)
		}
		p := &corev1.Pod{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: cluster.CrossplaneNamespace, Name: name}, p); err != nil {
			return err
		}
		pod = p
		return nil
	})
	return pod
}

// ensureNamespace creates ns for t.
func ensureNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	if err := platform.EnsureNamespace(t.Context(), c, ns); err != nil {
		t.Fatal(err)
	}
}
