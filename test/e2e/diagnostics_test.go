//go:build linux

package e2e_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestDiagnostics checks what a failing scenario leaves for whoever debugs
// it: diagnoseFailure, which every scenario runs when it fails, writes the
// cluster's diagnostics - objects, events, pods, every process's and
// container's log - names the
// directory, and leaks no token or key.
func TestDiagnostics(t *testing.T) {
	s := newScenario(t, false)
	xr := s.xwidget("diagnosed", map[string]any{"keys": int64(1)})
	s.create(xr)
	s.waitReady(xr)

	failed := &fakeT{failed: true}
	diagnoseFailure(failed)
	dir := failed.dir()
	if dir == "" {
		t.Fatalf("diagnoseFailure logged %q, want the diagnostics directory", failed.logs)
	}
	t.Logf("Diagnostics written to %s", dir)

	for _, f := range []string{
		"summary.txt", "events.txt", "secrets.txt",
		"resources/xwidgets.platform.widgetco.io.yaml",
		"resources/widgets.widget.m.widgetco.io.yaml",
		"resources/widgetkeys.widget.m.widgetco.io.yaml",
		"resources/providers.pkg.crossplane.io.yaml",
		"resources/functions.pkg.crossplane.io.yaml",
		"resources/managedresourcedefinitions.apiextensions.crossplane.io.yaml",
		"logs/widget-api.log", "pods.txt",
	} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("diagnostics lack %s: %v", f, err)
			continue
		}
		if fi.Size() == 0 {
			t.Errorf("diagnostics' %s is empty", f)
		}
	}
	if suite.c.Local() {
		for _, f := range []string{"logs/kube-apiserver.log", "logs/kubelet.log", "logs/containerd.log"} {
			if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
				t.Errorf("diagnostics lack %s, or it is empty (%v)", f, err)
			}
		}
	}
	for f, want := range map[string]string{
		"summary.txt": "XWidget",
		"resources/xwidgets.platform.widgetco.io.yaml": "name: " + xr.GetName(),
		"events.txt": s.ns,
		"pods.txt":   platform.ProviderName,
	} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); !strings.Contains(string(b), want) {
			t.Errorf("diagnostics' %s does not mention %q", f, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "errors.txt")); err == nil {
		t.Errorf("diagnostics reported errors:\n%s", b)
	}
	for _, pod := range []string{"crossplane-*-crossplane", "crossplane-rbac-manager-*", platform.ProviderName + "-*-" + cluster.RuntimeContainer, platform.FunctionName + "-*-" + cluster.RuntimeContainer} {
		if m, _ := filepath.Glob(filepath.Join(dir, "logs", "pod-"+pod+"-*.log")); len(m) == 0 {
			t.Errorf("diagnostics lack the logs of the pods %s (logs/pod-%s-*.log)", pod, pod)
		}
	}

	secret := s.connectionSecret(s.ns, status(xr, "connectionSecretName"), 1)
	for what, v := range map[string]string{"the Widget API token": apiToken, "an access key": string(secret["key-0"])} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, _ := os.ReadFile(p); strings.Contains(string(b), v) {
				t.Errorf("diagnostics file %s contains %s", p, what)
			}
			return nil
		})
	}
}

// fakeT is a failed test, for diagnoseFailure.
type fakeT struct {
	failed bool
	logs   []string
}

func (f *fakeT) Failed() bool { return f.failed }

func (f *fakeT) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// dir returns the directory diagnoseFailure logged.
func (f *fakeT) dir() string {
	for _, l := range f.logs {
		if rest, ok := strings.CutPrefix(l, "DIAGNOSTICS: "); ok {
			d, _, _ := strings.Cut(rest, " ")
			return d
		}
	}
	return ""
}
