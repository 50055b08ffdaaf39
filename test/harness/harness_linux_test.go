package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// Generous bounds for a slow, shared 2-core machine. Nothing asserts on how
// long anything takes; these only stop a hung test.
const (
	waitTimeout = 5 * time.Minute
	testTimeout = 15 * time.Minute
)

// integrationTools returns the tools, skipping the test when they are not
// configured (plain `go test ./...` without `make tools`).
func integrationTools(t *testing.T) Tools {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	tools, err := ToolsFromEnv()
	if err != nil {
		t.Skipf("integration test needs the tools: %v", err)
	}
	if os.Getenv("FUNCTION_AUTO_READY_BIN") == "" {
		t.Skip("integration test needs FUNCTION_AUTO_READY_BIN: run `bash hack/tools.sh all` and `eval \"$(bash hack/tools.sh env)\"`")
	}
	return tools
}

// testLogger sends harness logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// keptDir is a directory that survives a failed test so its logs and
// diagnostics can be read; it is removed when the test passes.
func keptDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "harness-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("HARNESS_KEEP_DIR") != "" {
			t.Logf("Kept harness directory %s", d)
			return
		}
		_ = os.RemoveAll(d)
	})
	return d
}

// buildFunctionAutoReady builds a Function package for function-auto-ready
// (no runtime image: the harness is its runtime).
func buildFunctionAutoReady(ctx context.Context, t *testing.T, tools Tools, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "pkg-function-auto-ready")
	writeFiles(t, root, map[string]string{"crossplane.yaml": `apiVersion: meta.pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-auto-ready
spec:
  crossplane:
    version: ">=v2.0.0"
`})
	out := filepath.Join(dir, "function-auto-ready.xpkg")
	if err := BuildPackage(ctx, tools.Crank, PackageBuild{Root: root, Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// eventually polls fn until it returns nil, failing the test with fn's last
// error after waitTimeout.
func eventually(ctx context.Context, t *testing.T, what string, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	var last error
	if err := wait.Poll(ctx, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		last = fn(ctx)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("%s: gave up after %s: %v", what, waitTimeout, last)
	}
}

// TestHarness starts the whole local control plane, installs
// function-auto-ready as a real Function package from the loopback registry,
// proves core calls it over mTLS by running a composition pipeline, installs
// a tiny provider package whose managed resource CRD gets served, and checks
// that Stop leaves no process or port behind.
func TestHarness(t *testing.T) { //nolint:gocognit,gocyclo // One story, told in order.
	tools := integrationTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := keptDir(t)
	log := testLogger(t)

	begin := time.Now()
	h, err := Start(ctx, Options{
		Dir:       dir,
		Log:       log,
		Tools:     &tools,
		WidgetAPI: &server.Options{Tokens: map[string]string{"harness-token": "harness"}},
	})
	if err != nil {
		t.Fatalf("Start(...): %v", err)
	}
	startDur := time.Since(begin)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = h.Stop()
		}
	})
	t.Cleanup(func() {
		if t.Failed() && !stopped {
			if d, err := h.DumpDiagnostics(context.Background(), ""); err == nil {
				t.Logf("Diagnostics in %s", d)
			}
		}
	})

	xpkg := buildFunctionAutoReady(ctx, t, tools, dir)
	ref, err := h.PushPackage(ctx, xpkg, "crossplane-contrib/function-auto-ready:v0.6.0")
	if err != nil {
		t.Fatalf("PushPackage(...): %v", err)
	}
	if want := h.RegistryHost() + "/"; !strings.HasPrefix(ref, want) {
		t.Fatalf("PushPackage(...): ref %q does not name the loopback registry %s", ref, h.RegistryHost())
	}

	t.Run("WidgetAPIServes", func(t *testing.T) {
		w := h.WidgetAPI()
		if w == nil {
			t.Fatal("WidgetAPI() = nil with Options.WidgetAPI set")
		}
		if !strings.HasPrefix(w.URL, "http://127.0.0.1:") {
			t.Errorf("WidgetAPI().URL = %q, want http://127.0.0.1:PORT", w.URL)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"/v1/widgets", nil)
		req.Header.Set("Authorization", "Bearer harness-token")
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			t.Errorf("GET /v1/widgets: status %d, want 200", rsp.StatusCode)
		}
	})

	var fn *Process
	var fnDur time.Duration
	t.Run("FunctionBecomesHealthy", func(t *testing.T) {
		tf := time.Now()
		fn, err = h.InstallFunction(ctx, "function-auto-ready", ref, Command{
			Path: os.Getenv("FUNCTION_AUTO_READY_BIN"),
			Args: []string{"--debug"},
		})
		if err != nil {
			t.Fatalf("InstallFunction(...): %v", err)
		}
		fnDur = time.Since(tf)
		rev := activeFunctionRevision(ctx, t, h, "function-auto-ready")
		if !strings.HasPrefix(rev.Status.Endpoint, "dns:///127.0.0.1:") {
			t.Errorf("FunctionRevision %s status.endpoint = %q, want dns:///127.0.0.1:PORT", rev.Name, rev.Status.Endpoint)
		}
		if rev.Spec.Package != ref {
			t.Errorf("FunctionRevision %s spec.package = %q, want %q", rev.Name, rev.Spec.Package, ref)
		}
	})
	if fn == nil {
		t.FailNow()
	}

	t.Run("CoreRunsPipelineOverTLS", func(t *testing.T) {
		applyYAML(ctx, t, h.Client(), probeXRD, probeComposition)
		eventually(ctx, t, "XRD established", func(ctx context.Context) error {
			return conditionTrue(ctx, h.Client(), "apiextensions.crossplane.io/v2", "CompositeResourceDefinition", "", "xprobes.harness.example.org", "Established")
		})
		// The XR's CRD is created by core once the XRD is established.
		eventually(ctx, t, "XR CRD established", func(ctx context.Context) error {
			if !h.crdEstablished(ctx, "xprobes.harness.example.org") {
				return fmt.Errorf("CRD xprobes.harness.example.org not established")
			}
			return nil
		})
		applyYAML(ctx, t, h.Client(), probeXR)
		// Synced=True means the pipeline ran: a failed RunFunction call
		// leaves the XR Synced=False with the gRPC error.
		eventually(ctx, t, "XR synced", func(ctx context.Context) error {
			return conditionTrue(ctx, h.Client(), "harness.example.org/v1alpha1", "XProbe", "default", "probe", "Synced")
		})
		eventually(ctx, t, "XR ready", func(ctx context.Context) error {
			return conditionTrue(ctx, h.Client(), "harness.example.org/v1alpha1", "XProbe", "default", "probe", "Ready")
		})
		// Core counted a successful call through its mTLS gRPC client...
		eventually(ctx, t, "core metrics show an OK RunFunction response", func(ctx context.Context) error {
			n, target, err := okResponses(ctx, h.CoreMetricsURL(), "function-auto-ready")
			if err != nil {
				return err
			}
			if n < 1 {
				return fmt.Errorf("no OK responses from function-auto-ready yet")
			}
			t.Logf("Core received %v OK RunFunction responses from function-auto-ready via %s", n, target)
			return nil
		})
		// ...and the function saw the request.
		b, err := os.ReadFile(fn.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "Running Function") {
			t.Errorf("function-auto-ready's log %s has no \"Running Function\" line; want its log of the request", fn.LogPath())
		}
	})

	t.Run("FunctionCrashIsReportedAndRecovered", func(t *testing.T) {
		if err := fn.Kill(); err != nil {
			t.Fatalf("Kill(): %v", err)
		}
		eventually(ctx, t, "Function unhealthy after its process died", func(ctx context.Context) error {
			f := &pkgv1.Function{}
			if err := h.Client().Get(ctx, types.NamespacedName{Name: "function-auto-ready"}, f); err != nil {
				return err
			}
			if c := f.GetCondition(pkgv1.TypeHealthy); c.Status != corev1.ConditionFalse {
				return fmt.Errorf("Healthy=%s, want False", c.Status)
			}
			return nil
		})
		if err := fn.Start(); err != nil {
			t.Fatalf("Start(): %v", err)
		}
		eventually(ctx, t, "Function healthy after restart", func(ctx context.Context) error {
			f := &pkgv1.Function{}
			if err := h.Client().Get(ctx, types.NamespacedName{Name: "function-auto-ready"}, f); err != nil {
				return err
			}
			if c := f.GetCondition(pkgv1.TypeHealthy); c.Status != corev1.ConditionTrue {
				return fmt.Errorf("Healthy=%s (%s), want True", c.Status, c.Message)
			}
			return nil
		})
	})

	t.Run("ProviderSmoke", func(t *testing.T) {
		root := filepath.Join(dir, "pkg-provider-smoke")
		writeFiles(t, root, map[string]string{
			"crossplane.yaml":                             smokeProviderMeta,
			"crds/gadgets.smoke.example.org.yaml":         smokeGadgetCRD,
			"crds/providerconfigs.smoke.example.org.yaml": smokeProviderConfigCRD,
		})
		out := filepath.Join(dir, "provider-smoke.xpkg")
		if err := BuildPackage(ctx, tools.Crank, PackageBuild{Root: root, Out: out}); err != nil {
			t.Fatal(err)
		}
		pref, err := h.PushPackage(ctx, out, "provider-smoke:v0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.InstallProvider(ctx, "provider-smoke", pref, Command{Path: "sleep", Args: []string{"3600"}})
		if err != nil {
			t.Fatalf("InstallProvider(...): %v", err)
		}
		if !p.Running() {
			t.Errorf("provider process is not running")
		}
		// Core turned the managed resource CRD into an active MRD, which
		// made the CRD; the ProviderConfig stayed a plain CRD.
		mrd := &xpextv1alpha1.ManagedResourceDefinition{}
		if err := h.Client().Get(ctx, types.NamespacedName{Name: "gadgets.smoke.example.org"}, mrd); err != nil {
			t.Fatalf("cannot get MRD gadgets.smoke.example.org: %v", err)
		}
		if mrd.Spec.State != xpextv1alpha1.ManagedResourceDefinitionActive {
			t.Errorf("MRD state = %q, want Active", mrd.Spec.State)
		}
		if err := h.Client().Get(ctx, types.NamespacedName{Name: "providerconfigs.smoke.example.org"}, &xpextv1alpha1.ManagedResourceDefinition{}); err == nil {
			t.Errorf("ProviderConfig CRD was turned into an MRD; want a plain CRD")
		}
		if !h.crdEstablished(ctx, "providerconfigs.smoke.example.org") {
			t.Errorf("CRD providerconfigs.smoke.example.org not established")
		}
		g := &unstructured.Unstructured{}
		g.SetAPIVersion("smoke.example.org/v1alpha1")
		g.SetKind("Gadget")
		g.SetNamespace("default")
		g.SetName("g1")
		_ = unstructured.SetNestedField(g.Object, "blue", "spec", "forProvider", "color")
		if err := h.Client().Create(ctx, g); err != nil {
			t.Fatalf("cannot create a Gadget: its CRD is not served: %v", err)
		}
	})

	t.Run("GarbageCollection", func(t *testing.T) {
		// Crossplane deletes composed resources, package revisions and
		// MRD-owned CRDs through ownerReferences: only kube-controller-
		// manager's garbage collector acts on those.
		if tools.KubeControllerManager == "" {
			t.Skip("set KUBE_CONTROLLER_MANAGER_BIN to run kube-controller-manager's garbage collector")
		}
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-owner"}}
		if err := h.Client().Create(ctx, owner); err != nil {
			t.Fatal(err)
		}
		dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-dependent", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}}}}
		if err := h.Client().Create(ctx, dep); err != nil {
			t.Fatal(err)
		}
		if err := h.Client().Delete(ctx, owner); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "dependent garbage collected", func(ctx context.Context) error {
			err := h.Client().Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{})
			if kerrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("dependent still exists (get error: %w)", err)
		})
	})

	t.Run("DumpDiagnostics", func(t *testing.T) {
		d, err := h.DumpDiagnostics(ctx, "")
		if err != nil {
			t.Fatalf("DumpDiagnostics(...): %v", err)
		}
		for _, f := range []string{
			"summary.txt", "events.txt", "secrets.txt", "crds.txt",
			"resources/functions.pkg.crossplane.io.yaml",
			"resources/functionrevisions.pkg.crossplane.io.yaml",
			"resources/providerrevisions.pkg.crossplane.io.yaml",
			"resources/managedresourcedefinitions.apiextensions.crossplane.io.yaml",
			"resources/compositeresourcedefinitions.apiextensions.crossplane.io.yaml",
			"resources/compositions.apiextensions.crossplane.io.yaml",
			"resources/xprobes.harness.example.org.yaml",
			"resources/gadgets.smoke.example.org.yaml",
			"logs/crossplane.log", "logs/function-auto-ready.log", "logs/provider-smoke.log",
			"logs/kube-apiserver.log", "logs/etcd.log", "logs/registry.log",
		} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				t.Errorf("diagnostics lack %s: %v", f, err)
			}
		}
		if _, err := os.Stat(filepath.Join(d, "errors.txt")); err == nil {
			b, _ := os.ReadFile(filepath.Join(d, "errors.txt"))
			t.Errorf("diagnostics reported errors:\n%s", b)
		}
		b, _ := os.ReadFile(filepath.Join(d, "secrets.txt"))
		if strings.Contains(string(b), "BEGIN") {
			t.Errorf("secrets.txt contains Secret data")
		}
	})

	// Everything the harness runs is a descendant of this process. Check what
	// they listen on, stop, and check that they and their ports are gone.
	procs := descendants(os.Getpid())
	// The registry and the Widget API server run in this process.
	socks := listeners(map[int]string{os.Getpid(): "harness.test"})
	for pid, addrs := range listeners(procs) {
		socks[pid] = addrs
	}
	ports := map[int]string{}
	for pid, addrs := range socks {
		for _, a := range addrs {
			host, p, _ := net.SplitHostPort(a)
			n, _ := strconv.Atoi(p)
			ports[n] = strconv.Itoa(pid) + " " + a
			if host != "127.0.0.1" && !coreWildcardPort(h, n) {
				t.Errorf("pid %d (%s) listens on %s, want 127.0.0.1", pid, procs[pid], a)
			}
		}
	}
	t.Logf("Processes before Stop: %v", procs)
	t.Logf("Listening sockets before Stop: %v", socks)
	for _, want := range []string{"etcd", "kube-apiserver", "crossplane", "function-auto-", "sleep"} {
		if !hasProc(procs, want) {
			t.Errorf("no %q among the harness's processes %v", want, procs)
		}
	}

	ts := time.Now()
	if err := h.Stop(); err != nil {
		t.Errorf("Stop(): %v", err)
	}
	stopped = true
	stopDur := time.Since(ts)
	select {
	case <-h.Done():
	default:
		t.Errorf("Done() not closed after Stop()")
	}
	for pid, name := range procs {
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running after Stop()", name, pid)
		}
	}
	open := listeningPorts()
	for p, what := range ports {
		if a, ok := open[p]; ok {
			t.Errorf("port %d (was %s) is still listening after Stop(): %s", p, what, a)
		}
	}
	if c, err := net.DialTimeout("tcp", h.RegistryHost(), time.Second); err == nil {
		_ = c.Close()
		t.Errorf("registry %s still accepts connections after Stop()", h.RegistryHost())
	}
	t.Logf("TIMINGS: harness start %s, function healthy %s (install to Healthy), teardown %s, test total %s",
		startDur.Round(100*time.Millisecond), fnDur.Round(100*time.Millisecond), stopDur.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
}

// coreWildcardPort reports whether port is one of the two that Crossplane
// core binds on all interfaces (it has flags for the ports, not the host).
func coreWildcardPort(h *Harness, port int) bool {
	return port == h.coreMetricsPort || port == h.coreHealthPort
}

func hasProc(procs map[int]string, prefix string) bool {
	for _, n := range procs {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func activeFunctionRevision(ctx context.Context, t *testing.T, h *Harness, name string) *pkgv1.FunctionRevision {
	t.Helper()
	l := &pkgv1.FunctionRevisionList{}
	if err := h.Client().List(ctx, l, client.MatchingLabels{pkgv1.LabelParentPackage: name}); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if l.Items[i].GetDesiredState() == pkgv1.PackageRevisionActive {
			return &l.Items[i]
		}
	}
	t.Fatalf("no active FunctionRevision for %s", name)
	return nil
}

func applyYAML(ctx context.Context, t *testing.T, c client.Client, docs ...string) {
	t.Helper()
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("cannot create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// conditionTrue returns nil when the object's condition is True.
func conditionTrue(ctx context.Context, c client.Client, apiVersion, kind, ns, name, ctype string) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, ci := range conds {
		m, _ := ci.(map[string]any)
		if m["type"] == ctype {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("%s %s: %s=%v (%v): %v", kind, name, ctype, m["status"], m["reason"], m["message"])
		}
	}
	return fmt.Errorf("%s %s has no %s condition yet", kind, name, ctype)
}

// okResponses sums core's function_run_function_response_total for the
// function with grpc_code="OK", and returns the gRPC target it used.
func okResponses(ctx context.Context, url, fn string) (float64, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer rsp.Body.Close()
	var n float64
	target := ""
	s := bufio.NewScanner(rsp.Body)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		l := s.Text()
		if !strings.HasPrefix(l, "function_run_function_response_total{") || !strings.Contains(l, `function_name="`+fn+`"`) || !strings.Contains(l, `grpc_code="OK"`) {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			return 0, "", err
		}
		n += v
		if _, rest, ok := strings.Cut(l, `grpc_target="`); ok {
			target, _, _ = strings.Cut(rest, `"`)
		}
	}
	return n, target, s.Err()
}

// TestSignalTeardown runs a harness (with a function installed) in a child
// process the way `make demo` does, interrupts it with SIGINT, and checks
// that every process it started has exited and no port it listened on is
// still open.
func TestSignalTeardown(t *testing.T) {
	integrationTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := keptDir(t)
	readyFile := filepath.Join(dir, "ready.json")

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperSignalHarness$", "-test.v")
	cmd.Env = append(os.Environ(), "HARNESS_HELPER=1", "HARNESS_HELPER_DIR="+dir, "HARNESS_HELPER_READY="+readyFile)
	out, err := os.Create(filepath.Join(dir, "helper.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	eventually(ctx, t, "helper harness ready", func(context.Context) error {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
			t.Fatalf("helper exited early (%v):\n%s", err, b)
		default:
		}
		_, err := os.Stat(readyFile)
		return err
	})
	procs := descendants(cmd.Process.Pid)
	socks := listeners(procs)
	t.Logf("Helper's processes: %v", procs)
	t.Logf("Helper's listening sockets: %v", socks)
	ports := map[int]bool{}
	for _, addrs := range socks {
		for _, a := range addrs {
			_, p, _ := net.SplitHostPort(a)
			n, _ := strconv.Atoi(p)
			ports[n] = true
		}
	}
	for _, want := range []string{"etcd", "kube-apiserver", "crossplane", "function-auto-"} {
		if !hasProc(procs, want) {
			t.Errorf("no %q among the helper's processes %v", want, procs)
		}
	}

	ts := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("helper exited with %v after SIGINT; want a clean exit", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("helper did not exit within %s of SIGINT", waitTimeout)
	}
	t.Logf("TIMINGS: teardown on SIGINT %s", time.Since(ts).Round(100*time.Millisecond))
	for pid, name := range procs {
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running after SIGINT teardown", name, pid)
		}
	}
	open := listeningPorts()
	for p := range ports {
		if a, ok := open[p]; ok {
			t.Errorf("port %d is still listening after SIGINT teardown: %s", p, a)
		}
	}
	if t.Failed() {
		b, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
		t.Logf("helper log:\n%s", b)
	}
}

// TestHelperSignalHarness is not a test: TestSignalTeardown runs it in a
// child process, where it starts a harness that handles SIGINT, installs
// function-auto-ready, writes the ready file and waits for the teardown.
func TestHelperSignalHarness(t *testing.T) {
	if os.Getenv("HARNESS_HELPER") != "1" {
		t.Skip("helper process for TestSignalTeardown")
	}
	tools := integrationTools(t)
	dir := os.Getenv("HARNESS_HELPER_DIR")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx := context.Background()
	h, err := Start(ctx, Options{Dir: dir, Log: log, Tools: &tools, HandleSignals: true})
	if err != nil {
		t.Fatal(err)
	}
	xpkg := buildFunctionAutoReady(ctx, t, tools, dir)
	ref, err := h.PushPackage(ctx, xpkg, "function-auto-ready:v0.6.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.InstallFunction(ctx, "function-auto-ready", ref, Command{Path: os.Getenv("FUNCTION_AUTO_READY_BIN")}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"kubeconfig": h.Kubeconfig(), "registry": h.RegistryHost()})
	if err := os.WriteFile(os.Getenv("HARNESS_HELPER_READY"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
}

const probeXRD = `apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xprobes.harness.example.org
spec:
  scope: Namespaced
  group: harness.example.org
  names:
    kind: XProbe
    plural: xprobes
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              note:
                type: string
`

const probeComposition = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xprobes
spec:
  compositeTypeRef:
    apiVersion: harness.example.org/v1alpha1
    kind: XProbe
  mode: Pipeline
  pipeline:
  - step: auto-ready
    functionRef:
      name: function-auto-ready
`

const probeXR = `apiVersion: harness.example.org/v1alpha1
kind: XProbe
metadata:
  namespace: default
  name: probe
spec:
  note: hello
  crossplane:
    compositionRef:
      name: xprobes
`

const smokeProviderMeta = `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-smoke
spec:
  crossplane:
    version: ">=v2.0.0"
`

const smokeGadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.smoke.example.org
spec:
  group: smoke.example.org
  names:
    kind: Gadget
    listKind: GadgetList
    plural: gadgets
    singular: gadget
    categories: [crossplane, managed]
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

const smokeProviderConfigCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: providerconfigs.smoke.example.org
spec:
  group: smoke.example.org
  names:
    kind: ProviderConfig
    listKind: ProviderConfigList
    plural: providerconfigs
    singular: providerconfig
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`
