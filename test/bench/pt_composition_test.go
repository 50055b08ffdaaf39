//go:build linux

package bench

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// TestPeerComposesLikeFunctionWidget renders the bench's peer Composition
// (test/bench/testdata/pt-composition.yaml) for the example claim's XR with
// the widget and its key observed Ready, and compares what it composes with
// function-widget's golden render of the same input
// (function/testdata/render/legacy-ready.yaml): the variants of the e2e
// section must compose the same managed resources, or they measure
// different things. It runs when the Crossplane CLI and the peer functions
// are built (eval "$(bash hack/tools.sh env)" after `bash hack/tools.sh
// function-patch-and-transform function-auto-ready`).
func TestPeerComposesLikeFunctionWidget(t *testing.T) {
	crank, pt, ar := os.Getenv("CRANK_BIN"), os.Getenv("FUNCTION_PATCH_AND_TRANSFORM_BIN"), os.Getenv("FUNCTION_AUTO_READY_BIN")
	if crank == "" || pt == "" || ar == "" {
		t.Skip("needs CRANK_BIN, FUNCTION_PATCH_AND_TRANSFORM_BIN and FUNCTION_AUTO_READY_BIN (hack/tools.sh)")
	}
	root, err := platform.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	functions := filepath.Join(t.TempDir(), "functions.yaml")
	var fy bytes.Buffer
	for _, f := range []struct{ name, bin string }{{fnPT, pt}, {fnAutoReady, ar}} {
		addr := serveInsecure(t, f.bin)
		fy.WriteString("---\napiVersion: pkg.crossplane.io/v1beta1\nkind: Function\nmetadata:\n  name: " + f.name +
			"\n  annotations:\n    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: " + addr +
			"\nspec:\n  package: loopback.invalid/" + f.name + ":v0\n")
	}
	if err := os.WriteFile(functions, fy.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	lg := filepath.Join(root, "examples", "composition", "legacy")
	cmd := exec.CommandContext(t.Context(), crank, "render", filepath.Join(lg, "xr.yaml"), filepath.Join(root, ptComposition), functions,
		"--observed-resources", filepath.Join(lg, "observed-ready.yaml"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crossplane render: %v\n%s", err, stderr.Bytes())
	}
	golden, err := os.ReadFile(filepath.Join(root, "function", "testdata", "render", "legacy-ready.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := byKind(t, out), byKind(t, golden)

	for _, kind := range []string{"Widget", "WidgetKey"} {
		if want[kind] == nil || got[kind] == nil {
			t.Fatalf("no %s in a render: function-widget's %t, the peer's %t", kind, want[kind] != nil, got[kind] != nil)
		}
		if diff := cmp.Diff(want[kind], got[kind]); diff != "" {
			t.Errorf("the peer composes another %s than function-widget\n-function-widget, +peer:\n%s", kind, diff)
		}
	}
	// The XR's status fields, but keysReady: render cannot pass the key's
	// connection details, so function-widget still waits for them (0/1)
	// where the peer, which reads the key's id, says 1/1. Conditions differ
	// by design (function-widget's own ones; see the Composition's comment).
	status := func(u map[string]any) map[string]any {
		s, _, _ := unstructured.NestedMap(u, "status")
		delete(s, "conditions")
		delete(s, "keysReady")
		return s
	}
	if diff := cmp.Diff(status(want["XWidget"]), status(got["XWidget"])); diff != "" {
		t.Errorf("the peer writes other XR status fields than function-widget\n-function-widget, +peer:\n%s", diff)
	}
}

// byKind decodes a render's output into its objects by kind (the last of a
// kind wins; each kind here is there once, but Results).
func byKind(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var o map[string]any
		if err := d.Decode(&o); err != nil {
			break
		}
		if k, ok := o["kind"].(string); ok {
			out[k] = o
		}
	}
	return out
}

// serveInsecure runs a function binary with --insecure on a free loopback
// port, the way `crossplane render` runs a function of the Development
// runtime, and returns its address once it accepts connections.
func serveInsecure(t *testing.T, bin string) string {
	t.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	fn := exec.CommandContext(t.Context(), bin, "--insecure", "--address="+addr)
	fn.Stdout, fn.Stderr = &logs, &logs
	if err := fn.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = fn.Process.Kill()
		_ = fn.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", filepath.Base(bin), logs.String())
		}
	})
	for range 100 {
		if c, err := (&net.Dialer{Timeout: 100 * time.Millisecond}).DialContext(t.Context(), "tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s does not listen on %s after 5s:\n%s", filepath.Base(bin), addr, logs.String())
	return ""
}
