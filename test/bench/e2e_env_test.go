//go:build linux

package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/widgetserver"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// e2eEnv is a real one-node cluster (test/lib/cluster) with Crossplane
// from its Helm chart, provider-widget and function-widget installed and
// the XWidget API published.
type e2eEnv struct {
	c                  *cluster.Cluster
	widgets            *widgetserver.Server
	provider, function *cluster.Runtime
	kube               client.WithWatch
	cfg                *rest.Config
	pkgs               platform.Packages
	dir                string
	root               string
	fnURL              string // function-widget's metrics URL
	provURL            string // provider-widget's leader's metrics URL
	provBin            string
	setup              time.Duration
	variant            *e2eVariant // how the run's claims are composed; nil: function-widget
}

func startE2E(t *testing.T, b *bench, providerArgs ...string) *e2eEnv {
	t.Helper()
	return startE2EWith(t, b, "", providerArgs...)
}

// An e2eSetup is how a section wants its cluster: what differs from the
// defaults startE2E uses.
type e2eSetup struct {
	// fnPkg is the function-widget package to install instead of the
	// working tree's, unless "".
	fnPkg string
	// coreArgs are core's arguments; nil: WIDGET_BENCH_E2E_CORE_ARGS.
	coreArgs []string
	// api are the Widget API server's options beside its tokens.
	api          server.Options
	providerArgs []string
	// nodes and nodeLossGrace are the cluster's (cluster.Options); 0:
	// one node, Kubernetes' grace.
	nodes         int
	nodeLossGrace time.Duration
}

// e2eDir holds the bench's cluster, replaced by the next run and kept after
// one for its logs. Short: containerd's and kubelet's sockets live below it.
const e2eDir = "/tmp/widget-bench-e2e"

// startE2EWith is startE2E installing the function-widget package fnPkg
// instead of the working tree's, unless fnPkg is "".
func startE2EWith(t *testing.T, b *bench, fnPkg string, providerArgs ...string) *e2eEnv {
	t.Helper()
	return startE2EFor(t, b, e2eSetup{fnPkg: fnPkg, providerArgs: providerArgs})
}

// startE2EFor starts the cluster set up as s says.
func startE2EFor(t *testing.T, b *bench, setup e2eSetup) *e2eEnv {
	t.Helper()
	fnPkg, providerArgs := setup.fnPkg, setup.providerArgs
	coreArgs := setup.coreArgs
	if coreArgs == nil {
		coreArgs = envArgs("WIDGET_BENCH_E2E_CORE_ARGS")
	}
	begin := time.Now()
	tools, err := cluster.Requirements()
	if err != nil {
		t.Fatalf("the e2e section runs a real one-node cluster (as root; eval \"$(bash hack/tools.sh env)\", %s=1): %v", cluster.EnableEnv, err)
	}
	crossplane, crank := os.Getenv("CROSSPLANE_BIN"), os.Getenv("CRANK_BIN")
	if crossplane == "" || crank == "" {
		t.Fatal("CROSSPLANE_BIN or CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	// The packages `make build` wrote (make bench builds them): Crossplane
	// runs their runtime images. The provider binary of the working tree only
	// answers --help for the report.
	provBin := b.build(t, "provider-widget", "./provider")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pkgs, err := platform.FindPackages(b.root)
	if err != nil {
		t.Fatal(err)
	}
	if fnPkg != "" {
		pkgs.Function = fnPkg
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// A killed run's containers still hold files in its directory.
	if _, err := cluster.ReclaimKilled(ctx, cluster.Options{Tools: tools, Log: log}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e2eDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e2eDir, 0o750); err != nil {
		t.Fatal(err)
	}
	// The machine runs one cluster at a time: Start waits for another's.
	c, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: e2eDir, Log: log, Nodes: setup.nodes, NodeLossGrace: setup.nodeLossGrace})
	if err != nil {
		t.Fatalf("cannot start the cluster: %v", err)
	}
	env := &e2eEnv{c: c, pkgs: pkgs, dir: e2eDir, root: b.root, provBin: provBin}
	ok := false
	defer func() {
		if !ok {
			env.stop()
		}
	}()
	if _, err := c.InstallCrossplane(ctx, cluster.Crossplane{
		Bin: crossplane, Version: "v2.4.2", Args: coreArgs,
		// As the e2e suite: platform.Install creates the provider's
		// activation policy; core's metrics as a platform scrapes them.
		Values: []string{"provider.defaultActivations={}", "metrics.enabled=true"},
	}); err != nil {
		t.Fatal(err)
	}
	api := setup.api
	api.Tokens = map[string]string{e2eToken: "bench"}
	if env.widgets, err = widgetserver.Start(api, e2eDir, net.JoinHostPort(c.NodeIP(), "0")); err != nil {
		t.Fatal(err)
	}
	err = platform.Install(ctx, c, env.widgets.URL, platform.Options{
		Root: b.root, Packages: pkgs, Crank: crank, Token: e2eToken, Log: log,
		ProviderArgs: append(envArgs("WIDGET_BENCH_E2E_PROVIDER_ARGS"), providerArgs...),
	})
	if err != nil {
		t.Fatalf("cannot install the platform (logs in %s): %v", filepath.Join(e2eDir, "logs"), err)
	}
	env.provider, env.function = c.Provider(platform.ProviderName), c.Function(platform.FunctionName)
	env.cfg = c.RESTConfig()
	env.cfg.QPS, env.cfg.Burst = 500, 1000 // measure the control plane, not our client's limiter
	env.cfg.WarningHandler = rest.NoWarnings{}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if env.kube, err = client.NewWithWatch(env.cfg, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	fns := env.function.Pods()
	if len(fns) == 0 {
		t.Fatal("function-widget has no pod")
	}
	addr, err := fns[0].Forward(platform.MetricsPort)
	if err != nil {
		t.Fatal(err)
	}
	env.fnURL = "http://" + addr + "/metrics"
	leader, err := env.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if addr, err = leader.Forward(platform.MetricsPort); err != nil {
		t.Fatal(err)
	}
	env.provURL = "http://" + addr + "/metrics"
	env.setup = time.Since(begin)
	ok = true
	return env
}

func (e *e2eEnv) stop() {
	if e.widgets != nil {
		_ = e.widgets.Close()
	}
	if err := e.c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cannot stop the cluster:", err)
	}
	if left := e.c.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "bench: the cluster left behind:\n%s\n", strings.Join(left, "\n"))
	}
}

// leaseHolder is the identity holding provider-widget's lease, or "".
func (e *e2eEnv) leaseHolder(ctx context.Context) string {
	l := &coordinationv1.Lease{}
	if err := e.c.Client().Get(ctx, types.NamespacedName{Namespace: cluster.CrossplaneNamespace, Name: platform.LeaseName}, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leader is provider-widget's pod that holds the lease, once one does.
func (e *e2eEnv) leader(ctx context.Context) (*cluster.Pod, error) {
	for {
		holder := e.leaseHolder(ctx)
		for _, p := range e.provider.Pods() { //nolint:contextcheck // Pods takes no context: it bounds its own List (30s)
			// The holder identity is <hostname>_<uuid>; a pod's hostname
			// is its name.
			if strings.HasPrefix(holder, p.Name()+"_") {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no provider-widget pod holds the lease (holder %q)", holder)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Names of the processes in procCPU.
const (
	procCore      = "Crossplane core"
	procFunction  = "function-widget"
	procProvider  = "provider-widget"
	procAPIServer = "kube-apiserver"
)

// processes finds the control plane's processes: the containers' by their
// pods and, by their command lines, the ones the cluster runs.
func (e *e2eEnv) processes(t *testing.T) []procCPU {
	t.Helper()
	ps := []procCPU{
		{procCore, e.c.CorePID(t.Context())},
		{procFunction, firstPID(e.function.Pods())},
		{procProvider, e.leaderPID(t)},
	}
	port := ""
	if u, err := url.Parse(e.cfg.Host); err == nil {
		port = u.Port()
	}
	for _, f := range []struct {
		name, exe, arg string
	}{
		{procAPIServer, "kube-apiserver", "--secure-port=" + port},
		{"etcd", "etcd", "--data-dir=" + filepath.Join(e.dir, "etcd")},
		{"kube-controller-manager", "kube-controller-manager", "--kubeconfig=" + e.c.Kubeconfig},
	} {
		if pid := findProcess(f.exe, f.arg); pid > 0 {
			ps = append(ps, procCPU{f.name, pid})
		} else {
			t.Logf("e2e: cannot find the %s process; its CPU time is not reported", f.name)
		}
	}
	ps = append(ps, procCPU{"benchmark process", os.Getpid()})
	for _, p := range ps {
		if p.pid <= 0 {
			t.Fatalf("e2e: %s is not running", p.name)
		}
	}
	return ps
}

// scrapeAll scrapes core, the function, the provider and kube-apiserver.
func (e *e2eEnv) scrapeAll(t *testing.T) (core, fn, prov, apisrv map[string]float64) {
	t.Helper()
	get := func(c *http.Client, u string) map[string]float64 {
		if u == "" {
			return map[string]float64{}
		}
		m, err := scrape(c, u)
		if err != nil {
			t.Logf("e2e: cannot scrape %s: %v", u, err)
		}
		return m
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	coreURL, err := e.c.CoreMetricsURL(t.Context())
	if err != nil {
		t.Logf("e2e: %v", err)
	}
	core = get(plain, coreURL)
	fn = get(plain, e.fnURL)
	prov = get(plain, e.provURL)
	if hc, err := rest.HTTPClientFor(e.cfg); err == nil {
		hc.Timeout = 30 * time.Second
		apisrv = get(hc, strings.TrimSuffix(e.cfg.Host, "/")+"/metrics")
	} else {
		apisrv = map[string]float64{}
	}
	return core, fn, prov, apisrv
}

// firstPID is the package container's PID in the first pod.
func firstPID(pods []*cluster.Pod) int {
	if len(pods) == 0 {
		return 0
	}
	return pods[0].ContainerPID(cluster.RuntimeContainer)
}

// leaderPID is the container PID of provider-widget's leader, the replica
// that reconciles.
func (e *e2eEnv) leaderPID(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := e.leader(ctx)
	if err != nil {
		t.Logf("e2e: %v", err)
		return 0
	}
	return p.ContainerPID(cluster.RuntimeContainer)
}
