package platform

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		err                         string
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
		"NoPackages": {
			reason: "Without packages for this architecture FindPackages says to run make build.",
			files: map[string]time.Duration{
				"_output/xpkg/provider-widget-v0.2.0-" + other + ".xpkg": 0,
				"_output/xpkg/function-widget-v0.2.0-" + arch + ".xpkg":  0,
			},
			want: want{err: "run `make build`"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for f, age := range tc.files {
				p := filepath.Join(root, f)
				write(t, p, "x")
				mt := time.Now().Add(-age)
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
			got, err := FindPackages(root)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Errorf("%s\nFindPackages(...): error %v, want one containing %q", tc.reason, err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nFindPackages(...): %v", tc.reason, err)
			}
			rel := func(p string) string { return strings.TrimPrefix(p, root+string(filepath.Separator)) }
			if diff := cmp.Diff(Packages{Provider: tc.want.provider, Function: tc.want.function, Version: tc.want.version}, Packages{Provider: rel(got.Provider), Function: rel(got.Function), Version: got.Version}); diff != "" {
				t.Errorf("%s\nFindPackages(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
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

func TestWindow(t *testing.T) {
	since := time.Date(2026, 11, 27, 19, 0, 0, 0, time.UTC)
	changed := func(name string, rev int64) Change { return Change{Name: name, Revision: rev} }
	empty := func(name string, rev int64) Change { return Change{Name: name, Revision: rev, Unchanged: true} }
	late := Change{Name: "ev", Revision: 12, Occurred: since.Add(-time.Minute)}
	cases := map[string]struct {
		reason  string
		changes []Change
		want    QuietWindow
	}{
		"OutsideTheWindow": {
			reason:  "Writes at or before the window's start and after its end are not in it.",
			changes: []Change{changed("a", 10), changed("a", 21)},
			want:    QuietWindow{},
		},
		"Churn": {
			reason:  "A write that changed something is churn.",
			changes: []Change{changed("a", 11)},
			want:    QuietWindow{Churn: []Change{changed("a", 11)}},
		},
		"OneEmptyWriteEach": {
			reason:  "The first write to an object that changed nothing is set apart, once per object.",
			changes: []Change{empty("a", 11), empty("b", 12)},
			want:    QuietWindow{Empty: []Change{empty("a", 11), empty("b", 12)}},
		},
		"SecondEmptyWriteIsChurn": {
			reason:  "A second write that changes nothing to the same object is a loop, so churn.",
			changes: []Change{empty("a", 11), empty("a", 13)},
			want:    QuietWindow{Empty: []Change{empty("a", 11)}, Churn: []Change{empty("a", 13)}},
		},
		"LateEvent": {
			reason:  "An Event that occurred before the window was only written in it.",
			changes: []Change{late, {Name: "ev2", Revision: 13, Occurred: since.Add(time.Second)}},
			want:    QuietWindow{Late: []Change{late}, Churn: []Change{{Name: "ev2", Revision: 13, Occurred: since.Add(time.Second)}}},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got := Window(tc.changes, 10, 20, since)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nWindow(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestChangedFields(t *testing.T) {
	cond := func(msg string) map[string]any {
		return map[string]any{"type": "Ready", "status": "True", "message": msg}
	}
	cases := map[string]struct {
		reason string
		a, b   map[string]any
		want   []string
	}{
		"Same": {
			reason: "Equal objects have no changed fields.",
			a:      map[string]any{"spec": map[string]any{"size": "small"}},
			b:      map[string]any{"spec": map[string]any{"size": "small"}},
		},
		"NestedInAList": {
			reason: "A field in a list of the same length is named by its index.",
			a:      map[string]any{"status": map[string]any{"conditions": []any{cond("a"), cond("b")}}},
			b:      map[string]any{"status": map[string]any{"conditions": []any{cond("a"), cond("c")}}},
			want:   []string{"status.conditions[1].message"},
		},
		"AddedAndRemoved": {
			reason: "Added and removed fields count, in key order; a list that changed length is named whole.",
			a:      map[string]any{"data": map[string]any{"a": "1"}, "list": []any{"x"}},
			b:      map[string]any{"data": map[string]any{"b": "1"}, "list": []any{"x", "y"}},
			want:   []string{"data.a", "data.b", "list"},
		},
		"Bounded": {
			reason: "At most maxFields paths are kept.",
			a:      map[string]any{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1},
			b:      map[string]any{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2},
			want:   []string{"a", "b", "c", "d"},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, changedFields(tc.a, tc.b, "", nil)); diff != "" {
				t.Errorf("\n%s\nchangedFields(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWithoutRevision(t *testing.T) {
	obj := func(rv, manager string, ready string) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"name": "x", "resourceVersion": rv, "managedFields": []any{map[string]any{"manager": manager}}},
			"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": ready}}},
		}
	}
	cases := map[string]struct {
		reason string
		a, b   map[string]any
		same   bool
	}{
		"OnlyRevision":  {reason: "A new resourceVersion and managedFields alone are no change.", a: obj("1", "core", "True"), b: obj("2", "claim", "True"), same: true},
		"ConditionFlip": {reason: "A condition that changed is a change.", a: obj("1", "core", "True"), b: obj("2", "core", "False")},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			a := obj("1", "core", "True")
			_ = withoutRevision(a)
			if diff := cmp.Diff(obj("1", "core", "True"), a); diff != "" {
				t.Errorf("withoutRevision changed its argument: -want, +got:\n%s", diff)
			}
			if got := sameContent(withoutRevision(tc.a), withoutRevision(tc.b)); got != tc.same {
				t.Errorf("\n%s\nsame content: want %t, got %t", tc.reason, tc.same, got)
			}
		})
	}
}
