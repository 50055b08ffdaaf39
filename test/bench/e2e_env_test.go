package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// harnessLock is the lock on the bench's control plane directory
// (harness.LockDir), taken by the first run of the process.
var (
	harnessLock    sync.Once
	harnessLockErr error
)

// e2eEnv is a local control plane with provider-widget and function-widget
// installed and the XWidget API published.
type e2eEnv struct {
	h       *harness.Harness
	p       *platform.Platform
	kube    client.WithWatch
	cfg     *rest.Config
	pkgs    platform.Packages
	dir     string
	root    string
	kcm     bool
	fnURL   string // function-widget's metrics URL
	provURL string // provider-widget's leader's metrics URL
	provBin string
	setup   time.Duration
	variant *e2eVariant // how the run's claims are composed; nil: function-widget
}

func startE2E(t *testing.T, b *bench, providerArgs ...string) *e2eEnv {
	t.Helper()
	return startE2EWith(t, b, "", providerArgs...)
}

// startE2EWith is startE2E installing the function-widget package fnPkg
// instead of the working tree's, unless fnPkg is "".
func startE2EWith(t *testing.T, b *bench, fnPkg string, providerArgs ...string) *e2eEnv {
	t.Helper()
	begin := time.Now()
	tools, err := harness.ToolsFromEnv()
	if err != nil {
		t.Fatalf("the e2e section needs the tools (eval \"$(bash hack/tools.sh env)\"): %v", err)
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
	// Kept after the run (replaced by the next) for its logs.
	dir := filepath.Join(b.root, "_output", "bench", "e2e-harness")
	// Held until the process ends: another bench in the same tree would
	// replace this one's control plane under it.
	harnessLock.Do(func() { _, harnessLockErr = harness.LockDir(dir) })
	if harnessLockErr != nil {
		t.Fatal(harnessLockErr)
	}
	if err := harness.RemoveDir(dir); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := harness.Start(context.Background(), harness.Options{
		Dir:   dir,
		Log:   log,
		Tools: &tools,
		// As the e2e suite: platform.Install creates the provider's policy.
		Activations: []string{},
		CoreArgs:    envArgs("WIDGET_BENCH_E2E_CORE_ARGS"),
		WidgetAPI:   &server.Options{Tokens: map[string]string{e2eToken: "bench"}},
	})
	if err != nil {
		t.Fatalf("cannot start the local control plane: %v", err)
	}
	env := &e2eEnv{h: h, pkgs: pkgs, dir: dir, root: b.root, provBin: provBin, kcm: tools.KubeControllerManager != ""}
	ok := false
	defer func() {
		if !ok {
			env.stop()
		}
	}()
	env.p, err = platform.Install(ctx, h, platform.Options{
		Root: b.root, Packages: pkgs, Crank: tools.Crank, Token: e2eToken, Log: log,
		ProviderArgs: append(envArgs("WIDGET_BENCH_E2E_PROVIDER_ARGS"), providerArgs...),
	})
	if err != nil {
		t.Fatalf("cannot install the platform (logs in %s): %v", filepath.Join(dir, "logs"), err)
	}
	env.cfg = h.RESTConfig()
	env.cfg.QPS, env.cfg.Burst = 500, 1000 // measure the control plane, not our client's limiter
	env.cfg.WarningHandler = rest.NoWarnings{}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if env.kube, err = client.NewWithWatch(env.cfg, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	if env.fnURL, err = env.p.FunctionMetricsURL(); err != nil {
		t.Fatal(err)
	}
	if env.provURL, err = env.p.ProviderMetricsURL(ctx); err != nil {
		t.Fatal(err)
	}
	env.setup = time.Since(begin)
	ok = true
	return env
}

func (e *e2eEnv) stop() {
	if err := e.h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cannot stop the local control plane:", err)
	}
}

// Names of the processes in procCPU.
const (
	procCore      = "Crossplane core"
	procFunction  = "function-widget"
	procProvider  = "provider-widget"
	procAPIServer = "kube-apiserver"
)

// processes finds the control plane's processes: those the harness runs
// and, by their command lines, the ones envtest runs.
func (e *e2eEnv) processes(t *testing.T) []procCPU {
	t.Helper()
	ps := []procCPU{
		{procCore, e.h.Core().PID()},
		{procFunction, firstPID(e.p.Function.Pods())},
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
		{"etcd", "etcd", "--data-dir=" + filepath.Join(e.h.Dir(), "etcd")},
		{"kube-controller-manager", "kube-controller-manager", "--kubeconfig=" + e.h.Kubeconfig()},
	} {
		if pid := findProcess(f.exe, f.arg); pid > 0 {
			ps = append(ps, procCPU{f.name, pid})
		} else if f.name != "kube-controller-manager" || e.kcm {
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
	core = get(plain, e.h.CoreMetricsURL())
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

// firstPID is the container PID of the first pod.
func firstPID(pods []*harness.Pod) int {
	if len(pods) == 0 {
		return 0
	}
	return pods[0].PID()
}

// leaderPID is the container PID of provider-widget's leader, the replica
// that reconciles.
func (e *e2eEnv) leaderPID(t *testing.T) int {
	t.Helper()
	p, err := e.p.Leader(t.Context())
	if err != nil {
		t.Logf("e2e: %v", err)
		return 0
	}
	return p.PID()
}
