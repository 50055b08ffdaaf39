//go:build linux

// Package e2e_test is the end-to-end suite: on a real one-node cluster
// (test/lib/cluster: kubelet, containerd, Crossplane core v2.4.2 installed
// from its Helm chart), core's package manager installs provider-widget and
// function-widget from their packages, and app teams' claims and XWidgets go
// to Ready against the reference Widget API. One cluster serves the whole
// suite; each scenario works in its own namespace.
//
// Run it with `make e2e` (as root; cluster.Require says what the machine
// lacks). On a failure a scenario writes the cluster's diagnostics and logs
// where; the run's directory (a we2e-* under the temporary directory; the
// suite prints it) is kept then, or always with E2E_KEEP_DIR=1.
package e2e_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/apis"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/test/lib/widgetserver"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// Widget API credentials of the suite: one project, one token. The token is
// random, a canary that checkSecrets looks for everywhere it must not be.
const apiProject = "e2e"

var apiToken = "e2e-token-" + rand.Text()

// apiTokens are the Widget API's static tokens, by project.
var apiTokens = map[string]string{apiToken: apiProject}

// Generous bounds for a slow, shared 2-core machine. Nothing asserts on how
// long anything takes; these only stop a hung scenario.
const (
	waitTimeout     = 5 * time.Minute
	scenarioTimeout = 15 * time.Minute
	setupTimeout    = 10 * time.Minute
)

// parallelism is how many scenarios run at once unless -test.parallel says
// otherwise: they mostly wait for the control plane, so more than
// GOMAXPROCS (the default) keeps the suite short.
const parallelism = "8"

// suite is shared by every scenario.
var suite struct {
	skip string
	// ctx is cancelled once the cluster is torn down, e.g. by Ctrl-C.
	ctx context.Context

	root string
	c    *cluster.Cluster
	// widgets is the reference Widget API, served in-process on the node's
	// address.
	widgets *widgetserver.Server
	// provider and function are the packages' runtimes: their pods.
	provider, function *cluster.Runtime
	// pkgs are the provider and function packages installed, crank the
	// Crossplane CLI that builds Configurations.
	pkgs  platform.Packages
	crank string
	// signer signs the packages as make publish does, with a key pair
	// made for the run; pub is its public half.
	signer *platform.Signer
	pub    string
	// kube knows core Kubernetes types and the provider's managed
	// resources; use unstructured objects for XRs and claims.
	kube client.Client
	api  *widgetapi.Client

	mu      sync.Mutex
	timings []timing

	// policies orders the scenarios that change namespace policies and
	// the one that needs a quiet cluster. Every XR requires the namespace
	// policy EnvironmentConfigs (docs/policy.md), so core reconciles every
	// XR of the cluster each time one changes: scenarios that write them
	// hold it for reading (scenario.namespacePolicy), TestConvergence for
	// writing.
	policies sync.RWMutex
}

// timing is how long one scenario took, from its start to its end.
type timing struct {
	name string
	took time.Duration
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	begin := time.Now()
	flag.Parse()
	parallelFlagSet := false
	flag.Visit(func(f *flag.Flag) { parallelFlagSet = parallelFlagSet || f.Name == "test.parallel" })
	if !parallelFlagSet {
		_ = flag.Set("test.parallel", parallelism)
	}
	if testing.Short() {
		suite.skip = "e2e suite: skipped with -short"
		return m.Run()
	}
	remote, err := existingCluster()
	if err != nil {
		return fail(err)
	}
	var tools cluster.Tools
	if remote == nil {
		tools, err = cluster.Requirements()
		switch {
		case errors.Is(err, cluster.ErrDisabled):
			suite.skip = "e2e suite: " + err.Error() + "; or set " + kubeconfigEnv + " to run it against a cluster of your own (docs/development.md)"
			return m.Run()
		case err != nil:
			return fail(errors.Wrapf(err, "or set %s to run the suite against a cluster of your own (docs/development.md)", kubeconfigEnv))
		}
	}
	crank := os.Getenv("CRANK_BIN")
	crossplane := os.Getenv("CROSSPLANE_BIN")
	cosign := os.Getenv("COSIGN_BIN")
	if crank == "" || crossplane == "" || cosign == "" {
		return fail(errors.New("CROSSPLANE_BIN, CRANK_BIN or COSIGN_BIN is unset: eval \"$(bash hack/tools.sh env)\""))
	}
	if suite.root, err = platform.FindRoot(); err != nil {
		return fail(err)
	}

	// Short, so under the temporary directory: containerd's and
	// kubelet's unix sockets live below it.
	dir, err := os.MkdirTemp("", "we2e-")
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	pkgs, err := platform.FindPackages(suite.root)
	if err != nil {
		return fail(err)
	}
	log.Info("Packages", "provider", pkgs.Provider, "function", pkgs.Function, "version", pkgs.Version)
	log.Info("Crossplane core flags", "args", coreArgs(), "chart values", coreValues())
	suite.pkgs, suite.crank = pkgs, crank

	// The stand-in change logs sidecar needs no cluster: it builds while
	// one starts.
	sidecar := platform.StartChangeLogsSidecarBuild(ctx, log, suite.root, filepath.Join(dir, "bin", "changelogs-sidecar"))

	// The cluster lives until the suite ends, not just for the set-up's
	// context. On Ctrl-C the scenarios end and it is torn down, so that no
	// pod, mount or link is left behind.
	var stop context.CancelFunc
	suite.ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tStart := time.Now()
	if remote != nil {
		remote.Dir, remote.Log = dir, log
		suite.c, err = cluster.Connect(ctx, *remote)
	} else {
		suite.c, err = cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log})
	}
	if err != nil {
		return fail(errors.Wrapf(err, "cannot start the cluster (kept %s)", dir))
	}
	passed := false
	defer func() {
		err := suite.c.Stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cannot stop the cluster:", err)
			code = 1
		}
		if left := suite.c.Leftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: the cluster left behind:\n%s\n", strings.Join(left, "\n"))
			passed, code = false, 1
		}
		if passed && err == nil && os.Getenv("E2E_KEEP_DIR") == "" {
			_ = os.RemoveAll(dir)
			return
		}
		if suite.c.Local() {
			fmt.Printf("e2e: kept the run's directory %s (logs/, node/, diagnostics/)\n", dir)
		} else {
			fmt.Printf("e2e: kept the run's directory %s (logs/, pod-logs/, diagnostics/)\n", dir)
		}
	}()
	if _, err := suite.c.InstallCrossplane(ctx, cluster.Crossplane{
		Bin: crossplane, Version: "v2.4.2", Args: coreArgs(),
		Values: append([]string{
			// No default ManagedResourceActivationPolicy (the chart's
			// activates everything): provider-widget declares safe-start,
			// so this proves the policy platform.Install creates is
			// enough.
			"provider.defaultActivations={}",
			// Core's metrics, as a platform that scrapes them runs it.
			"metrics.enabled=true",
		}, coreValues()...),
	}); err != nil {
		return fail(withDiagnostics(err))
	}
	suite.c.WatchProjectedTokens(suite.ctx)
	// Workload identity (identity_test.go): the Widget API trusts
	// kube-apiserver's ServiceAccount tokens for its audience.
	ids, err := widgetserver.TrustCluster(ctx, suite.c.Client(), suite.c.Kube.Config, filepath.Join(dir, "kube-apiserver-ca.crt"), *clusterIdentity())
	if err != nil {
		return fail(err)
	}
	suite.widgets, err = widgetserver.Start(server.Options{
		Tokens:         apiTokens,
		IdentityTokens: ids,
		// Asynchronous like the real thing, but quick.
		ProvisionDelay: time.Second,
		ResizeDelay:    time.Second,
		DeleteDelay:    time.Second,
	}, dir, widgetAPIAddress())
	if err != nil {
		return fail(err)
	}
	defer func() { _ = suite.widgets.Close() }()
	startTook := time.Since(tStart)

	if suite.signer, suite.pub, err = newSigner(ctx, cosign, filepath.Join(dir, "signing")); err != nil {
		return fail(err)
	}

	tInstall := time.Now()
	err = platform.Install(ctx, suite.c, suite.widgets.URL, platform.Options{
		Root:     suite.root,
		Packages: pkgs,
		Crank:    crank,
		Token:    apiToken,
		// A lease of 15s rather than 60s: scenarios that kill the provider
		// wait for a standby to take over.
		ProviderArgs: []string{"--debug", "--lease-duration=15s", "--renew-deadline=10s"},
		FunctionArgs: []string{"--debug"},
		// Every scenario runs with change logs on, so that the canary
		// check covers the change logs sidecar's log of all of them
		// (TestChangeLogs reads it).
		ChangeLogs:        true,
		ChangeLogsSidecar: sidecar,
		// Signed as make publish signs: TestInstalledPackagesAreSigned
		// checks what core installed against it.
		Signer: suite.signer,
		Log:    log,
	})
	if err != nil {
		return fail(withDiagnostics(err))
	}
	suite.provider = suite.c.Provider(platform.ProviderName)
	suite.function = suite.c.Function(platform.FunctionName)
	installTook := time.Since(tInstall)

	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apis.AddToScheme} {
		if err := add(s); err != nil {
			return fail(err)
		}
	}
	if suite.kube, err = client.New(suite.c.RESTConfig(), client.Options{Scheme: s}); err != nil {
		return fail(err)
	}
	if suite.api, err = widgetapi.New(suite.widgets.URL, widgetapi.WithToken(apiToken)); err != nil {
		return fail(err)
	}

	// Scenarios start on a platform that serves: every pod ready and
	// kube-apiserver routing conversions to the provider.
	if err := waitPlatformHealthy(); err != nil {
		return fail(withDiagnostics(err))
	}

	ledger, err := startSecretLedger(suite.c.RESTConfig(), suite.c.ProjectedTokens, apiToken)
	if err != nil {
		return fail(err)
	}

	tScenarios := time.Now()
	code = m.Run()
	// After every scenario, before the cluster goes: no secret may have
	// reached a log, an event or an object's status.
	checkCtx, checkCancel := context.WithTimeout(context.Background(), checkSecretsTimeout)
	defer checkCancel()
	if err := checkSecrets(checkCtx, ledger); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	if err := checkAuditLog(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	passed = code == 0
	report(startTook, installTook, time.Since(tScenarios), time.Since(begin))
	return code
}

// checkAuditLog checks the requests kube-apiserver's audit log holds; a
// cluster of the user's own keeps it on its machine, out of the suite's
// reach.
func checkAuditLog() error {
	if !suite.c.Local() {
		fmt.Println("E2E RBAC, requests and events: not checked: kube-apiserver's audit log is on the cluster's own machine")
		return nil
	}
	var errs []error
	// The packages ran with exactly the permissions Crossplane gives them:
	// a request RBAC refused is a rule missing in a user's cluster.
	if err := checkForbidden(); err != nil {
		errs = append(errs, withDiagnostics(err))
	}
	// The provider asks for nothing docs/rbac.md says a platform may take
	// away from it.
	errs = append(errs, checkProviderRequests())
	// Every event is sent once: a process that sends each twice (two
	// sinks for one recorder) doubles its event writes and has half of
	// them refused.
	if err := checkEventCreates(); err != nil {
		errs = append(errs, withDiagnostics(err))
	}
	return errors.Join(errs...)
}

// checkForbidden fails when kube-apiserver refused any request of a
// ServiceAccount - the packages', core's, the RBAC manager's - during the
// suite.
func checkForbidden() error {
	all, err := suite.c.Forbidden()
	if err != nil {
		return err
	}
	lines := make([]string, 0, len(all))
	starting, rollout := 0, 0
	for _, f := range all {
		switch {
		case f.Starting:
			// kube-apiserver serves for a moment before its RBAC
			// authorizer has read the roles (TestAPIServerRestart).
			starting += f.Count
		case f.Rollout:
			// A new package revision has a new ServiceAccount: the
			// outgoing pods lose their binding before they stop, the
			// incoming ones start before theirs exists
			// (TestConfigurationUpgrade).
			rollout += f.Count
		default:
			lines = append(lines, f.String())
		}
	}
	if len(lines) == 0 {
		fmt.Printf("E2E RBAC: no request of a ServiceAccount was forbidden, apart from %d while kube-apiserver was starting again (before its RBAC authorizer had read the roles) and %d during package rollouts (a new revision's ServiceAccount not bound yet, or the old one's unbound before its pods stopped)\n", starting, rollout)
		return nil
	}
	return errors.Errorf("RBAC refused %d kinds of request of ServiceAccounts (does the package, or Crossplane's Helm chart, grant what is needed?):\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// checkEventCreates fails when a package runtime's ServiceAccount had more
// than a tenth of its Event creates refused as already existing (at least
// 20 creates): each event sent twice. A few are a retry after a lost
// response (the suite stops kube-apiserver and kills processes). Crossplane
// core v2.4.2's own ServiceAccount sends about every event twice (upstream:
// two sinks for its broadcaster): that is reported, not failed.
func checkEventCreates() error {
	all, err := suite.c.EventCreates()
	if err != nil {
		return err
	}
	var bad []string
	seen := make([]string, 0, len(all))
	for _, c := range all {
		n := c.Created + c.Conflicts
		seen = append(seen, fmt.Sprintf("%s %d (%d already existed)", c.User, n, c.Conflicts))
		ours := strings.HasPrefix(c.User, providerUser) || strings.HasPrefix(c.User, functionUser)
		if ours && n >= 20 && c.Conflicts*10 > n {
			bad = append(bad, fmt.Sprintf("%s: %d of %d Event creates were refused as already existing", c.User, c.Conflicts, n))
		}
	}
	if len(bad) > 0 {
		return errors.Errorf("events were sent twice (does a process start two sinks for one event broadcaster?):\n  %s", strings.Join(bad, "\n  "))
	}
	fmt.Printf("E2E events: the packages sent each once; Event creates by ServiceAccount: %s\n", strings.Join(seen, "; "))
	return nil
}

// coreArgs are extra flags for Crossplane core: those docs/install.md
// recommends (platform.CoreArgs), or E2E_CORE_ARGS (space separated) in
// their place, where E2E_CORE_ARGS=none runs core with its own defaults;
// --debug with E2E_CORE_DEBUG=1, to see why it reconciles what it
// reconciles; and --enable-operations.
func coreArgs() []string {
	args := platform.CoreArgs()
	switch v := os.Getenv("E2E_CORE_ARGS"); v {
	case "":
	case "none":
		args = nil
	default:
		args = strings.Fields(v)
	}
	if os.Getenv("E2E_CORE_DEBUG") != "" {
		args = append(args, "--debug")
	}
	// Operations are alpha and off by default; TestRotateKeysOperation
	// runs one (docs/operations.md).
	return append(args, "--enable-operations")
}

// coreValues are more values for Crossplane's Helm chart, from
// E2E_CORE_VALUES (space separated key=value, as helm's --set takes them).
func coreValues() []string { return strings.Fields(os.Getenv("E2E_CORE_VALUES")) }

// fail reports an error that stops the suite before any scenario runs.
func fail(err error) int {
	fmt.Fprintln(os.Stderr, "e2e:", err)
	return 1
}

// withDiagnostics adds a diagnostics dump to err, unless it names one.
func withDiagnostics(err error) error {
	if strings.Contains(err.Error(), "diagnostics in ") {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if suite.c == nil {
		return err
	}
	d, derr := suite.c.DumpDiagnostics(ctx, "")
	if derr != nil {
		return err
	}
	return errors.Wrapf(err, "diagnostics in %s", d)
}

// report prints the suite's timings.
func report(start, install, scenarios, total time.Duration) {
	suite.mu.Lock()
	defer suite.mu.Unlock()
	sort.Slice(suite.timings, func(i, j int) bool { return suite.timings[i].name < suite.timings[j].name })
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	fmt.Printf("E2E TIMINGS: cluster and Crossplane started %s, packages installed and XWidget API published %s, scenarios %s, suite wall time %s\n",
		r(start), r(install), r(scenarios), r(total))
	for _, t := range suite.timings {
		fmt.Printf("E2E TIMINGS:   %-40s %s\n", t.name, r(t.took))
	}
}

// A scenario is one test's world: its namespace and its context.
type scenario struct {
	t   *testing.T
	ctx context.Context
	ns  string
}

// newScenario creates the scenario's namespace. Disruptive scenarios (that
// kill a process or measure latency) run alone, the others in parallel.
// When the scenario fails it writes diagnostics and logs their directory.
func newScenario(t *testing.T, parallel bool) *scenario {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	if parallel {
		t.Parallel()
	}
	begin := time.Now()
	ctx, cancel := context.WithTimeout(suite.ctx, scenarioTimeout)
	t.Cleanup(cancel)
	s := &scenario{t: t, ctx: ctx, ns: namespaceFor(t.Name())}
	t.Cleanup(func() {
		took := time.Since(begin)
		suite.mu.Lock()
		suite.timings = append(suite.timings, timing{name: t.Name(), took: took})
		suite.mu.Unlock()
		t.Logf("TIMING: scenario %s took %s", t.Name(), took.Round(100*time.Millisecond))
	})
	t.Cleanup(func() { diagnoseFailure(t) })
	if !parallel {
		// A disruptive scenario hands the next one a healthy platform:
		// pods it killed or replaced are back and ready.
		t.Cleanup(func() {
			if err := waitPlatformHealthy(); err != nil {
				t.Errorf("the platform is not healthy again after the scenario: %v", err)
			}
		})
	}
	if err := platform.EnsureNamespace(ctx, suite.c.Client(), s.ns); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitPlatformHealthy waits until provider-widget and function-widget are
// Healthy with all their pods ready: the provider's two replicas, the
// function's one.
func waitPlatformHealthy() error {
	ctx, cancel := context.WithTimeout(suite.ctx, waitTimeout)
	defer cancel()
	var last error
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		last = platformHealthy(ctx)
		return last == nil, nil
	})
	if err != nil {
		return errors.Wrapf(last, "after %s", waitTimeout)
	}
	return nil
}

func platformHealthy(ctx context.Context) error {
	for _, pkg := range []pkgv1.PackageWithRuntime{
		&pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: platform.ProviderName}},
		&pkgv1.Function{ObjectMeta: metav1.ObjectMeta{Name: platform.FunctionName}},
	} {
		if err := suite.c.Client().Get(ctx, client.ObjectKeyFromObject(pkg), pkg); err != nil {
			return err
		}
		if c := pkg.GetCondition(pkgv1.TypeHealthy); c.Status != corev1.ConditionTrue {
			return errors.Errorf("%s Healthy=%s: %s", pkg.GetName(), c.Status, c.Message)
		}
	}
	for rt, want := range map[*cluster.Runtime]int{suite.provider: 2, suite.function: 1} {
		ready := 0
		for _, p := range rt.Pods() { //nolint:contextcheck // Pods takes no context: it bounds its own List (30s)
			if p.Ready() {
				ready++
			}
		}
		if ready != want {
			return errors.Errorf("%d of %d pods ready", ready, want)
		}
	}
	return conversionServed(ctx)
}

// conversionServed returns nil once kube-apiserver converts through the
// provider's webhook Service: a ready pod is not yet an endpoint kube-proxy
// routes to. A dry-run create of a v1alpha1 Widget stores nothing but is
// converted to the stored v1beta1 all the same.
func conversionServed(ctx context.Context) error {
	probe := &namespacedv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "conversion-probe"},
		Spec: namespacedv1alpha1.WidgetSpec{
			ManagedResourceSpec: defaultMRSpec(""),
			ForProvider:         commonv1alpha1.WidgetParameters{Size: ptr.To(widgetapi.SizeSmall)},
		},
	}
	return errors.Wrap(suite.kube.Create(ctx, probe, client.DryRunAll), "conversion through the provider's webhook")
}

// failureReporter is the part of testing.T that diagnoseFailure uses.
type failureReporter interface {
	Failed() bool
	Logf(format string, args ...any)
}

// diagnoseFailure writes the cluster's diagnostics when t failed and logs
// their directory.
func diagnoseFailure(t failureReporter) {
	if !t.Failed() {
		return
	}
	if suite.ctx.Err() != nil {
		t.Logf("The suite was interrupted; the cluster's logs are in %s", filepath.Join(suite.c.Dir(), "logs"))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := suite.c.DumpDiagnostics(ctx, "")
	if err != nil {
		t.Logf("Cannot write diagnostics: %v", err)
		return
	}
	t.Logf("DIAGNOSTICS: %s (objects, events, pods, every process's and container's log)", d)
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// namespaceFor derives a namespace name from a test name.
func namespaceFor(test string) string {
	n := "e2e-" + strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(strings.TrimPrefix(test, "Test")), "-"), "-")
	if len(n) > 40 {
		n = strings.TrimRight(n[:40], "-")
	}
	return n
}
