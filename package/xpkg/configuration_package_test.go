package xpkg_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/widgetco/crossplane-widget/package/xpkg"
	validatecli "github.com/widgetco/crossplane-widget/test/lib/validate"
)

// The configuration-widget checks of TestPackages.

// checkReproduciblePushImage is checkReproduciblePush for a single image.
// The Configuration pushed to the other registry differs in its dependsOn,
// so only its examples layer can be compared.
func checkReproduciblePushImage(t *testing.T, img v1.Image, other string) {
	t.Helper()
	o := pull(t, other)
	a, b := annotatedLayer(t, img, "upbound", ".up/examples.yaml"), annotatedLayer(t, o, "upbound", ".up/examples.yaml")
	if !bytes.Equal(a, b) {
		t.Errorf("the examples of the Configuration pushed to %s differ", other)
	}
}

// checkConfiguration checks configuration-widget's package layer, built for
// dependencies in registry: Crossplane's parser and a Configuration linter
// accept it; dependsOn names registry's provider-widget and function-widget
// at the constraint of the version; the objects are the XRDs and
// Compositions of examples/composition with the Compositions calling the
// function by its dependency name; `crossplane beta validate` accepts them
// against the provider's and the function's CRDs; the Crossplane constraint
// admits what the e2e tier runs.
func checkConfiguration(t *testing.T, img v1.Image, root, registry string) {
	t.Helper()
	c := xpkg.Configuration
	y := annotatedLayer(t, img, "base", "package.yaml")
	ps := newParser(t)
	pkg, err := ps.Parse(t.Context(), io.NopCloser(bytes.NewReader(y)))
	if err != nil {
		t.Fatalf("Crossplane's parser rejects package.yaml: %v", err)
	}
	if err := linter("Configuration").Lint(pkg); err != nil {
		t.Fatalf("Crossplane's Configuration linter rejects the package: %v", err)
	}
	meta, ok := pkg.GetMeta()[0].(*pkgmetav1.Configuration)
	if !ok {
		t.Fatalf("package meta is a %T", pkg.GetMeta()[0])
	}

	constraint, err := xpkg.Constraint(version)
	if err != nil {
		t.Fatal(err)
	}
	type dep struct{ APIVersion, Kind, Package, Version string }
	got := make([]dep, 0, len(meta.Spec.DependsOn))
	for _, d := range meta.Spec.DependsOn {
		got = append(got, dep{APIVersion: deref(d.APIVersion), Kind: deref(d.Kind), Package: deref(d.Package), Version: d.Version})
	}
	want := []dep{
		{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Package: registry + "/provider-widget", Version: constraint},
		{APIVersion: "pkg.crossplane.io/v1", Kind: "Function", Package: registry + "/function-widget", Version: constraint},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dependsOn: -want, +got:\n%s", diff)
	}
	dc, err := semver.NewConstraint(constraint)
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{version: true, "v0.1.0": true, "v0.1.7": true, "v0.1.8-rc.1": true, "v0.0.9": false, "v0.1.0-alpha": false, "v0.2.0": false, "v1.0.0": false} {
		if got := dc.Check(semver.MustParse(v)); got != want {
			t.Errorf("dependency version %s in %q: want %t, got %t", v, constraint, want, got)
		}
	}
	checkCrossplaneConstraint(t, xpkg.Configuration.Name, meta.Spec.Crossplane.Version)
	for _, k := range []string{"maintainer", "source", "license", "description", "readme"} {
		if strings.TrimSpace(meta.GetAnnotations()["meta.crossplane.io/"+k]) == "" {
			t.Errorf("annotation meta.crossplane.io/%s is missing", k)
		}
	}

	// The objects are examples/composition's, with the function's
	// dependency name in the Compositions.
	fn, err := xpkg.DependencyName(registry + "/function-widget")
	if err != nil {
		t.Fatal(err)
	}
	var files bytes.Buffer
	for _, f := range c.Objects {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		files.WriteString("\n---\n")
		files.Write(b)
	}
	src, err := ps.Parse(t.Context(), io.NopCloser(&files))
	if err != nil {
		t.Fatalf("cannot parse %v: %v", c.Objects, err)
	}
	byName := func(objs []kruntime.Object) map[string]kruntime.Object {
		m := map[string]kruntime.Object{}
		for _, o := range objs {
			mo := o.(interface{ GetName() string })
			m[fmt.Sprintf("%T %s", o, mo.GetName())] = o
		}
		return m
	}
	wantObjs := byName(src.GetObjects())
	for _, o := range wantObjs {
		if comp, ok := o.(*xpextv1.Composition); ok {
			for i := range comp.Spec.Pipeline {
				comp.Spec.Pipeline[i].FunctionRef.Name = fn
			}
		}
	}
	if len(wantObjs) != 4 {
		t.Errorf("examples hold %d XRDs and Compositions, want 4", len(wantObjs))
	}
	if diff := cmp.Diff(wantObjs, byName(pkg.GetObjects())); diff != "" {
		t.Errorf("package objects vs %v (functionRef %s): -want, +got:\n%s", c.Objects, fn, diff)
	}

	// crossplane beta validate: the Compositions (with their function
	// inputs) and the app teams' examples against the packaged XRDs and the
	// provider's and function's CRDs.
	dir := t.TempDir()
	var xrds, comps bytes.Buffer
	for _, doc := range strings.Split(string(y), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: CompositeResourceDefinition"):
			xrds.WriteString("---\n" + doc + "\n")
		case strings.Contains(doc, "kind: Composition"):
			comps.WriteString("---\n" + doc + "\n")
		}
	}
	for n, b := range map[string][]byte{"xrds.yaml": xrds.Bytes(), "compositions.yaml": comps.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := validatecli.Run(t, root,
		[]string{filepath.Join(dir, "xrds.yaml"), "package/provider/crds", "package/function/input"},
		[]string{filepath.Join(dir, "compositions.yaml"), "examples/composition/namespaced/xr.yaml", "examples/composition/legacy/claim.yaml"})
	if err != nil || !validatecli.Clean(out) {
		t.Errorf("crossplane beta validate rejects the package's objects: %v\n%s", err, out)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
