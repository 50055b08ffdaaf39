package harness

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
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
// with its runtime image.
func buildFunctionAutoReady(ctx context.Context, t *testing.T, tools Tools, dir string) string {
	t.Helper()
	out, err := BuildFunction(ctx, tools.Crank, dir, "function-auto-ready", os.Getenv("FUNCTION_AUTO_READY_BIN"))
	if err != nil {
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

// coreWildcardPort reports whether port is one of the three that Crossplane
// core binds on all interfaces (it has flags for the ports, not the host).
func coreWildcardPort(h *Harness, port int) bool {
	return port == h.coreMetricsPort || port == h.coreHealthPort || port == h.coreWebhookPort
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

// checkPodProcess checks a pod's container process runs as Crossplane's
// Deployment runtime runs it: uid and gid 2000 (runAsUser, runAsGroup), no
// supplementary groups, chrooted into its own root, with the environment
// want names and no KUBECONFIG (it finds the API server in-cluster).
func checkPodProcess(t *testing.T, p *Pod, want map[string]string) {
	t.Helper()
	pid := p.PID()
	if pid == 0 {
		t.Fatalf("pod %s has no running container", p.Name())
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Uid:", "Gid:":
			for _, id := range f[1:] {
				if id != "2000" {
					t.Errorf("pod %s: %s, want 2000 throughout", p.Name(), line)
					break
				}
			}
		case "Groups:":
			t.Errorf("pod %s: %s, want none", p.Name(), line)
		}
	}
	root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pid))
	if err != nil || root == "/" {
		t.Errorf("pod %s's root is %q (%v), want a directory of its own", p.Name(), root, err)
	}
	envb, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(envb), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("pod %s: %s=%q, want %q", p.Name(), k, env[k], v)
		}
	}
	if v, ok := env["KUBECONFIG"]; ok {
		t.Errorf("pod %s has KUBECONFIG=%q; a pod finds the API server in-cluster", p.Name(), v)
	}
	if env["KUBERNETES_SERVICE_HOST"] == "" {
		t.Errorf("pod %s has no KUBERNETES_SERVICE_HOST", p.Name())
	}
}
