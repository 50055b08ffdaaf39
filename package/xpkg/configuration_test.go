package xpkg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestConstraint(t *testing.T) {
	cases := map[string]struct {
		reason  string
		version string
		want    string
		wantErr bool
	}{
		"ZeroMinor":  {reason: "Before v1 a minor version may break: stay in the minor line.", version: "v0.3.1", want: ">=v0.3.1, <v0.4.0-0"},
		"Major":      {reason: "From v1 stay in the major line.", version: "v1.2.3", want: ">=v1.2.3, <v2.0.0-0"},
		"Prerelease": {reason: "A pre-release build depends on builds of its own line.", version: "v0.0.0-dev.76.gabcdef0", want: ">=v0.0.0-dev.76.gabcdef0, <v0.1.0-0"},
		"NotSemver":  {reason: "A commit hash is no version Crossplane can resolve.", version: "e60515b", wantErr: true},
		"Partial":    {reason: "v1.2 is not a full version.", version: "v1.2", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Constraint(tc.version)
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nConstraint(%q): error %v, want error %t", tc.reason, tc.version, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("\n%s\nConstraint(%q): want %q, got %q", tc.reason, tc.version, tc.want, got)
			}
		})
	}
}

func TestDependencyName(t *testing.T) {
	cases := map[string]struct {
		reason string
		ref    string
		want   string
	}{
		"Org":       {reason: "Crossplane names a dependency after its repository path.", ref: "ghcr.io/widgetco/function-widget", want: "widgetco-function-widget"},
		"Loopback":  {reason: "The registry's host and port do not count.", ref: "127.0.0.1:5000/widgetco/function-widget", want: "widgetco-function-widget"},
		"NoOrg":     {reason: "Directly under the host: just the package.", ref: "xpkg.example.com/function-widget", want: "function-widget"},
		"DeepPath":  {reason: "Every path segment counts; dots become dashes.", ref: "xpkg.example.com/acme/platform.v2/function-widget", want: "acme-platform-v2-function-widget"},
		"Truncated": {reason: "At most 63 characters, as a DNS label.", ref: "xpkg.example.com/" + strings.Repeat("a", 70), want: strings.Repeat("a", 63)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DependencyName(tc.ref)
			if err != nil {
				t.Fatalf("\n%s\nDependencyName(%q): %v", tc.reason, tc.ref, err)
			}
			if got != tc.want {
				t.Errorf("\n%s\nDependencyName(%q): want %q, got %q", tc.reason, tc.ref, tc.want, got)
			}
		})
	}
}

// TestConfigurationFiles checks the package root the build writes, from a
// throwaway repository: dependsOn set for the registry and version, the
// Compositions pointed at the function's dependency name, and clear
// refusals of what the build cannot package.
func TestConfigurationFiles(t *testing.T) {
	meta := `apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-widget
spec:
  dependsOn:
  - apiVersion: pkg.crossplane.io/v1
    kind: Provider
    package: example.com/widgetco/provider-widget
    version: ">=v0.0.1"
  - apiVersion: pkg.crossplane.io/v1
    kind: Function
    package: example.com/widgetco/function-widget
    version: ">=v0.0.1"
`
	xrd := "apiVersion: apiextensions.crossplane.io/v2\nkind: CompositeResourceDefinition\nmetadata:\n  name: xwidgets.platform.widgetco.io\n"
	comp := func(fn string) string {
		return "# a comment\napiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: c\nspec:\n  mode: Pipeline\n  pipeline:\n  - step: s\n    functionRef:\n      name: " + fn + "\n"
	}
	cases := map[string]struct {
		reason   string
		meta     string
		comp     string
		registry string
		version  string
		want     map[string]string // file -> a line it must hold
		wantErr  string
	}{
		"Built": {
			reason:   "dependsOn names the registry at the version's constraint; the Composition calls the dependency's name.",
			meta:     meta,
			comp:     comp("function-widget"),
			registry: "xpkg.example.com/acme",
			version:  "v0.3.1",
			want: map[string]string{
				"crossplane.yaml":   "- apiVersion: pkg.crossplane.io/v1\n    kind: Provider\n    package: xpkg.example.com/acme/provider-widget\n    version: '>=v0.3.1, <v0.4.0-0'\n  - apiVersion: pkg.crossplane.io/v1\n    kind: Function\n    package: xpkg.example.com/acme/function-widget\n    version: '>=v0.3.1, <v0.4.0-0'",
				"c-comp.yaml":       "name: acme-function-widget",
				"c-definition.yaml": "name: xwidgets.platform.widgetco.io",
			},
		},
		"ExtraDependency": {
			reason:   "A dependency added by hand must not be dropped silently.",
			meta:     meta + "  - apiVersion: pkg.crossplane.io/v1\n    kind: Provider\n    package: example.com/other/provider-x\n    version: \">=v1.0.0\"\n",
			comp:     comp("function-widget"),
			registry: "xpkg.example.com/acme",
			version:  "v0.3.1",
			wantErr:  "must name the provider-widget Provider and the function-widget Function",
		},
		"Shorthand": {
			reason:   "The deprecated provider: shorthand is refused with what to write instead.",
			meta:     strings.Replace(meta, "  - apiVersion: pkg.crossplane.io/v1\n    kind: Provider\n    package:", "  - provider:", 1),
			comp:     comp("function-widget"),
			registry: "xpkg.example.com/acme",
			version:  "v0.3.1",
			wantErr:  "(apiVersion pkg.crossplane.io/v1, kind, package, version)",
		},
		"OtherFunction": {
			reason:   "A Composition calling a function the Configuration does not depend on cannot work.",
			meta:     meta,
			comp:     comp("function-patch-and-transform"),
			registry: "xpkg.example.com/acme",
			version:  "v0.3.1",
			wantErr:  "calls function function-patch-and-transform, which the Configuration does not depend on",
		},
		"BadRegistry": {
			reason:   "A URL is not a registry.",
			meta:     meta,
			comp:     comp("function-widget"),
			registry: "https://xpkg.example.com",
			version:  "v0.3.1",
			wantErr:  "is not a registry host",
		},
		"BadVersion": {
			reason:   "A version Crossplane cannot resolve is refused with what to do.",
			meta:     meta,
			comp:     comp("function-widget"),
			registry: "xpkg.example.com/acme",
			version:  "e60515b",
			wantErr:  "pass VERSION=vX.Y.Z",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for f, content := range map[string]string{"meta/crossplane.yaml": tc.meta, "ex/c/comp.yaml": tc.comp, "ex/c/definition.yaml": xrd} {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, f), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := ConfigurationPackage{
				Name: "configuration-widget", Meta: "meta/crossplane.yaml",
				Objects: []string{"ex/c/definition.yaml", "ex/c/comp.yaml"}, Examples: "ex",
				Provider: Provider, Function: Function, FunctionRef: "function-widget",
			}
			b := &Builder{RepoRoot: root, OutputDir: filepath.Join(root, "out"), Version: tc.version, Revision: "r"}
			files, err := b.ConfigurationFiles(c, tc.registry)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("\n%s\nConfigurationFiles(...): want an error containing %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("\n%s\nConfigurationFiles(...): %v", tc.reason, err)
			}
			names := make([]string, 0, len(files))
			for n := range files {
				names = append(names, n)
			}
			wantNames := make([]string, 0, len(tc.want))
			for n := range tc.want {
				wantNames = append(wantNames, n)
			}
			if diff := cmp.Diff(wantNames, names, sortStrings); diff != "" {
				t.Errorf("\n%s\nConfigurationFiles(...) files: -want, +got:\n%s", tc.reason, diff)
			}
			for n, line := range tc.want {
				if !strings.Contains(string(files[n]), line) {
					t.Errorf("\n%s\nConfigurationFiles(...) %s lacks %q:\n%s", tc.reason, n, line, files[n])
				}
			}
		})
	}
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })
