//go:build linux

package e2e_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// The suite runs against a cluster of the user's own (a kind cluster, say)
// when kubeconfigEnv names its kubeconfig; docs/development.md gives the
// steps.
const (
	// kubeconfigEnv is an admin's kubeconfig of the cluster.
	kubeconfigEnv = "E2E_KUBECONFIG"
	// registryEnv is a registry (host:port, on a loopback or private
	// address: Crossplane pulls packages over plain HTTP only from those)
	// that this machine pushes to and the cluster pulls from, with
	// registryUserEnv and registryPasswordEnv its credentials if it needs
	// any.
	registryEnv         = "E2E_REGISTRY"
	registryUserEnv     = "E2E_REGISTRY_USERNAME"
	registryPasswordEnv = "E2E_REGISTRY_PASSWORD"
	// widgetAPIEnv is an address of this machine the cluster's pods reach
	// (an IP, or IP:port): the suite's Widget API listens there.
	widgetAPIEnv = "E2E_WIDGET_API_ADDR"
)

// existingCluster says how to reach the cluster of the user's own, or nil
// for the suite's own node.
func existingCluster() (*cluster.Remote, error) {
	kc := os.Getenv(kubeconfigEnv)
	if kc == "" {
		return nil, nil
	}
	r := &cluster.Remote{
		Kubeconfig:   kc,
		Registry:     os.Getenv(registryEnv),
		RegistryAuth: authn.Basic{Username: os.Getenv(registryUserEnv), Password: os.Getenv(registryPasswordEnv)},
		Helm:         os.Getenv("HELM_BIN"),
	}
	switch {
	case r.Registry == "":
		return nil, errors.Errorf("%s is set, and %s is not: name a registry (host:port) that this machine pushes to and the cluster pulls from", kubeconfigEnv, registryEnv)
	case os.Getenv(widgetAPIEnv) == "":
		return nil, errors.Errorf("%s is set, and %s is not: name an address of this machine the cluster's pods reach (kind: the docker network's gateway), where the suite's Widget API listens", kubeconfigEnv, widgetAPIEnv)
	case r.Helm == "":
		return nil, errors.New("HELM_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	return r, nil
}

// widgetAPIAddress is where the suite's Widget API listens: on the suite's
// own node's address, or where a cluster of the user's own reaches this
// machine.
func widgetAPIAddress() string {
	if suite.c.Local() {
		return net.JoinHostPort(suite.c.NodeIP(), "0")
	}
	a := os.Getenv(widgetAPIEnv)
	if _, _, err := net.SplitHostPort(a); err != nil {
		return net.JoinHostPort(a, "0")
	}
	return a
}

// needsNode skips t when the suite runs against a cluster of the user's
// own: what it checks needs the suite's own node (what names).
func needsNode(t testing.TB, what string) {
	t.Helper()
	if suite.skip == "" && !suite.c.Local() {
		t.Skipf("%s: %v", what, cluster.ErrNotLocal)
	}
}

// TestConnectByKubeconfig reaches the suite's own cluster as the suite
// reaches a cluster of the user's own (cluster.Connect): by its kubeconfig
// and registry alone. It sees the packages' pods, pushes a package, reads
// core's log and every pod's through the API and writes diagnostics with
// them; it refuses to install a second Crossplane before pushing anything,
// says which methods need the node, and leaves the cluster as it was when
// stopped.
func TestConnectByKubeconfig(t *testing.T) {
	if suite.skip == "" && !suite.c.Local() {
		t.Skip("connects to the suite's own cluster, and the suite runs against a cluster of your own")
	}
	s := newScenario(t, true)
	rc, err := cluster.Connect(s.ctx, cluster.Remote{
		Kubeconfig: suite.c.Kubeconfig, Registry: suite.c.Registry.Host, RegistryAuth: suite.c.Registry.Auth,
		Helm: os.Getenv("HELM_BIN"), Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Local() {
		t.Error("a cluster reached by kubeconfig says it is local")
	}
	if n := len(rc.Provider(platform.ProviderName).Pods()); n != 2 {
		t.Errorf("provider-widget has %d pods through the kubeconfig, want 2", n)
	}
	fnPods := rc.Function(platform.FunctionName).Pods()
	if len(fnPods) == 0 {
		t.Fatal("function-widget has no pods through the kubeconfig")
	}

	ref, err := rc.PushPackage(s.ctx, suite.pkgs.Function, "e2e-connect/function-widget:"+suite.pkgs.Version)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(r, remote.WithAuthFromKeychain(suite.c.Registry.Keychain()), remote.WithContext(s.ctx)); err != nil {
		t.Errorf("the package pushed through the connected cluster is not in its registry: %v", err)
	}

	if b, err := rc.CoreLog(s.ctx); err != nil || len(b) == 0 {
		t.Errorf("Crossplane core's log through the API: %d bytes, error %v; want what it logged", len(b), err)
	}
	d, err := rc.DumpDiagnostics(s.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fnPods {
		m, _ := filepath.Glob(filepath.Join(d, "logs", "pod-"+p.Name()+"-"+cluster.RuntimeContainer+"-*.log"))
		if len(m) == 0 {
			t.Errorf("diagnostics in %s lack function-widget's log (pod %s) through the API", d, p.Name())
		}
		for _, f := range m {
			if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
				t.Errorf("diagnostics' %s is empty (%v)", f, err)
			}
		}
	}
	dirs := rc.LogDirs(s.ctx)
	if logs, _ := filepath.Glob(filepath.Join(dirs[len(dirs)-1], "pod-*.log")); len(logs) == 0 {
		t.Errorf("LogDirs %v hold no pod's log", dirs)
	}

	_, err = rc.InstallCrossplane(s.ctx, cluster.Crossplane{Bin: os.Getenv("CROSSPLANE_BIN"), Version: "v2.4.2"})
	if err == nil || !strings.Contains(err.Error(), "installed already") {
		t.Errorf("installing Crossplane into a cluster that has it: %v, want a refusal saying it is installed already", err)
	}

	_, logsErr := rc.ContainerLogs(cluster.RuntimeContainer)
	_, fwdErr := fnPods[0].Forward(platform.MetricsPort)
	_, metricsErr := rc.CoreMetricsURL(s.ctx)
	for what, err := range map[string]error{
		"StopAPIServer":  rc.StopAPIServer(),
		"Kill":           rc.Function(platform.FunctionName).Kill(),
		"Freeze":         rc.Function(platform.FunctionName).Freeze(),
		"ContainerLogs":  logsErr,
		"Forward":        fwdErr,
		"CoreMetricsURL": metricsErr,
	} {
		if !errors.Is(err, cluster.ErrNotLocal) {
			t.Errorf("%s on a cluster reached by kubeconfig: %v, want ErrNotLocal", what, err)
		}
	}

	if err := rc.Stop(); err != nil {
		t.Errorf("stopping a connected cluster: %v", err)
	}
	if left := rc.Leftovers(); len(left) > 0 {
		t.Errorf("a connected cluster left behind %v", left)
	}
	if !rc.Function(platform.FunctionName).Running() {
		t.Error("function-widget stopped running when the connected cluster was stopped")
	}
}
