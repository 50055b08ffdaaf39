package platform

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgetco/crossplane-widget/test/harness"
)

func withConditions(kind, ns, name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func cond(t, s, r, m string) map[string]any {
	return map[string]any{"type": t, "status": s, "reason": r, "message": m}
}

func TestStatusLineAndProblems(t *testing.T) {
	cases := map[string]struct {
		reason       string
		u            *unstructured.Unstructured
		wantLine     string
		wantProblems []string
	}{
		"NoStatus": {
			reason:   "An object nothing has reconciled yet says so.",
			u:        withConditions("WidgetClaim", "team-b", "web", map[string]any{}),
			wantLine: "WidgetClaim team-b/web: no conditions yet",
		},
		"Converging": {
			reason: "Crossplane's conditions come first, then the function's; reasons only where they help; problems are the messages of conditions that are not True.",
			u: withConditions("XWidget", "team-a", "web", map[string]any{
				"widgetState": "Provisioning",
				"keysReady":   "0/2",
				"conditions": []any{
					cond("KeysReady", "False", "WaitingForWidget", "keys wait"),
					cond("Responsive", "True", "", ""),
					cond("Ready", "False", "Creating", "Unready resources: widget"),
					cond("WidgetReady", "False", "Provisioning", "being provisioned"),
					cond("Synced", "True", "ReconcileSuccess", ""),
				},
			}),
			wantLine:     "XWidget team-a/web: Synced=True Ready=False(Creating) WidgetReady=False(Provisioning) KeysReady=False(WaitingForWidget) Responsive=True state=Provisioning keys=0/2",
			wantProblems: []string{"Ready: Unready resources: widget", "WidgetReady: being provisioned", "KeysReady: keys wait"},
		},
		"ClusterScoped": {
			reason:   "A cluster-scoped object has no namespace in its name.",
			u:        withConditions("Widget", "", "web-x", map[string]any{"conditions": []any{cond("Ready", "True", "Available", "")}}),
			wantLine: "Widget web-x: Ready=True",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantLine, StatusLine(tc.u)); diff != "" {
				t.Errorf("%s\nStatusLine(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantProblems, Problems(tc.u), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nProblems(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGetCondition(t *testing.T) {
	u := withConditions("XWidget", "a", "b", map[string]any{"conditions": []any{cond("Ready", "True", "Available", "")}})
	cases := map[string]struct {
		reason string
		typ    string
		want   Condition
	}{
		"Present": {reason: "A condition the object has is returned.", typ: "Ready", want: Condition{Type: "Ready", Status: "True", Reason: "Available"}},
		"Absent":  {reason: "A condition the object lacks is Unknown.", typ: "Synced", want: Condition{Type: "Synced", Status: "Unknown"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, GetCondition(u, tc.typ)); diff != "" {
				t.Errorf("%s\nGetCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReadObjects(t *testing.T) {
	p := filepath.Join(t.TempDir(), "objs.yaml")
	write(t, p, "# comment\napiVersion: v1\nkind: Secret\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: team-a}\n")
	objs, err := ReadObjects(p)
	if err != nil {
		t.Fatalf("ReadObjects(...): %v", err)
	}
	got := make([]string, 0, len(objs))
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+Name(o))
	}
	if diff := cmp.Diff([]string{"Secret a", "ConfigMap team-a/b"}, got); diff != "" {
		t.Errorf("ReadObjects(...): empty documents are skipped, the rest read in order: -want, +got:\n%s", diff)
	}
}

func TestFindPackages(t *testing.T) {
	arch := runtime.GOARCH
	other := "arm64"
	if arch == other {
		other = "amd64"
	}
	type want struct {
		provider, function, version string
		built                       bool
		errIs                       error
		meta                        string
	}
	cases := map[string]struct {
		reason string
		files  map[string]time.Duration // path under root -> age
		want   want
	}{
		"ReleasePackages": {
			reason: "The packages the package target writes for this architecture win: the newest provider package and the function package of its version.",
			files: map[string]time.Duration{
				"_output/xpkg/provider-widget-v0.1.0-" + arch + ".xpkg":  time.Hour,
				"_output/xpkg/provider-widget-v0.2.0-" + arch + ".xpkg":  time.Minute,
				"_output/xpkg/provider-widget-v0.3.0-" + other + ".xpkg": 0,
				"_output/xpkg/function-widget-v0.2.0-" + arch + ".xpkg":  time.Hour,
				"_output/xpkg/function-widget-v0.1.0-" + arch + ".xpkg":  0,
			},
			want: want{provider: "_output/xpkg/provider-widget-v0.2.0-" + arch + ".xpkg", function: "_output/xpkg/function-widget-v0.2.0-" + arch + ".xpkg", version: "v0.2.0"},
		},
		"NewestFunction": {
			reason: "Without a function package of the provider's version, the newest function package.",
			files: map[string]time.Duration{
				"_output/xpkg/provider-widget-v0.2.0-" + arch + ".xpkg": 0,
				"_output/xpkg/function-widget-v0.1.0-" + arch + ".xpkg": time.Hour,
				"_output/xpkg/function-widget-dev-" + arch + ".xpkg":    time.Minute,
			},
			want: want{provider: "_output/xpkg/provider-widget-v0.2.0-" + arch + ".xpkg", function: "_output/xpkg/function-widget-dev-" + arch + ".xpkg", version: "v0.2.0"},
		},
		"FallbackGeneratesMeta": {
			reason: "Without both release packages FindPackages builds from package/, generating a crossplane.yaml (with safe-start) where there is none; without crank that fails as tools missing.",
			files: map[string]time.Duration{
				"_output/xpkg/provider-widget-v0.2.0-" + arch + ".xpkg": 0,
				"package/provider/crds/widgets.yaml":                    0,
				"package/function/input/policies.yaml":                  0,
			},
			want: want{version: "v0.0.0-local", built: true, errIs: harness.ErrToolsMissing, meta: "safe-start"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root, out := t.TempDir(), t.TempDir()
			for f, age := range tc.files {
				p := filepath.Join(root, f)
				write(t, p, "x")
				mt := time.Now().Add(-age)
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
			got, err := FindPackages(context.Background(), root, "", out)
			if diff := cmp.Diff(tc.want.errIs, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nFindPackages(...): error: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.errIs == nil {
				rel := func(p string) string { return strings.TrimPrefix(p, root+string(filepath.Separator)) }
				if diff := cmp.Diff(Packages{Provider: tc.want.provider, Function: tc.want.function, Version: tc.want.version}, Packages{Provider: rel(got.Provider), Function: rel(got.Function), Version: got.Version, Built: got.Built}); diff != "" {
					t.Errorf("%s\nFindPackages(...): -want, +got:\n%s", tc.reason, diff)
				}
			}
			if tc.want.built != got.Built {
				t.Errorf("%s\nFindPackages(...): Built = %t, want %t", tc.reason, got.Built, tc.want.built)
			}
			if tc.want.meta != "" {
				b, _ := os.ReadFile(filepath.Join(out, "provider-widget", "crossplane.yaml"))
				if !strings.Contains(string(b), tc.want.meta) {
					t.Errorf("%s\nstaged provider crossplane.yaml does not contain %q:\n%s", tc.reason, tc.want.meta, b)
				}
				if _, err := os.Stat(filepath.Join(out, "provider-widget", "crds", "widgets.yaml")); err != nil {
					t.Errorf("%s\nstaged provider package lacks its CRDs: %v", tc.reason, err)
				}
			}
		})
	}
}

func TestFindBinaries(t *testing.T) {
	root := t.TempDir()
	if _, err := FindBinaries(root); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("FindBinaries(...) without binaries: error %v, want one naming `make build`", err)
	}
	write(t, filepath.Join(root, "_output", "bin", "provider-widget"), "x")
	write(t, filepath.Join(root, "_output", "bin", "function-widget"), "x")
	if _, err := FindBinaries(root); err != nil {
		t.Errorf("FindBinaries(...) with both binaries: %v", err)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
