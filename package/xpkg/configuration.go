package xpkg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"
)

// pkgAPIVersion is the API version of Crossplane's package objects, which a
// dependency names with its kind (the provider: and function: shorthands
// are deprecated in Crossplane v2).
const pkgAPIVersion = "pkg.crossplane.io/v1"

// DefaultRegistry is where the Configuration's dependencies are unless the
// build is told otherwise (make build REGISTRY=...).
const DefaultRegistry = "ghcr.io/widgetco"

// A ConfigurationPackage is a Configuration package this repository ships:
// metadata in Root, its objects read from where they live.
type ConfigurationPackage struct {
	// Name of the package and its repository in a registry.
	Name string
	// Meta is crossplane.yaml, the package's metadata.
	Meta string
	// Objects are the YAML files of the XRDs and Compositions it installs.
	Objects []string
	// Examples is the directory of example manifests (--examples-root).
	Examples string
	// Ignore are patterns, relative to Examples, of YAML files left out.
	Ignore []string
	// Provider and Function are the packages it depends on, published next
	// to it with the same version.
	Provider Package
	Function Package
	// FunctionRef is the name the Compositions in Objects call the
	// function by; the build replaces it with the name Crossplane gives the
	// function it installs as a dependency.
	FunctionRef string
}

// Configuration is configuration-widget, the XWidget API.
var Configuration = ConfigurationPackage{
	Name: "configuration-widget",
	Meta: "package/configuration/crossplane.yaml",
	Objects: []string{
		"examples/composition/namespaced/definition.yaml",
		"examples/composition/namespaced/composition.yaml",
		"examples/composition/legacy/definition.yaml",
		"examples/composition/legacy/composition.yaml",
	},
	Examples:    "examples/composition",
	Ignore:      []string{"*/observed-*.yaml", "*/definition.yaml", "*/composition.yaml", "functions.yaml"},
	Provider:    Provider,
	Function:    Function,
	FunctionRef: Function.Name,
}

// Constraint is the version constraint a Configuration of version v puts
// on its dependencies: v or later, before the next minor version (before
// v1.0.0) or the next major version (from v1.0.0). The upper bound is a
// pre-release so that pre-release builds of v's line match.
func Constraint(v string) (string, error) {
	sv, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v"))
	if err != nil {
		return "", errors.Errorf("version %q is not a semantic version: Crossplane resolves a Configuration's dependencies by semantic version (make build derives one from git; pass VERSION=vX.Y.Z)", v)
	}
	next := semver.New(sv.Major()+1, 0, 0, "0", "")
	if sv.Major() == 0 {
		next = semver.New(0, sv.Minor()+1, 0, "0", "")
	}
	return fmt.Sprintf(">=%s, <v%s", v, next), nil
}

// DependencyName is the name Crossplane v2 gives a package it installs as a
// dependency from ref (a registry host and repository, no tag): the
// repository path as a DNS label, as crossplane-runtime's xpkg.ToDNSLabel
// makes it. ghcr.io/widgetco/function-widget becomes
// widgetco-function-widget.
func DependencyName(ref string) (string, error) {
	r, err := name.NewRepository(ref, name.StrictValidation)
	if err != nil {
		return "", errors.Wrapf(err, "%q is not a package repository", ref)
	}
	return toDNSLabel(r.RepositoryStr()), nil
}

// toDNSLabel is crossplane-runtime v2.4.0's xpkg.ToDNSLabel: lower-case
// letters and digits kept, '.', '/', ':' and '-' become '-' except at the
// ends, at most 63 characters. (That package is not imported: it pulls in
// cosign and cloud credential helpers.)
func toDNSLabel(s string) string {
	var cut strings.Builder
	for i := range s {
		b := s[i]
		if ('a' <= b && b <= 'z') || ('0' <= b && b <= '9') {
			cut.WriteByte(b)
		}
		if (b == '.' || b == '/' || b == ':' || b == '-') && (i != 0 && i != 62 && i != len(s)-1) {
			cut.WriteByte('-')
		}
		if i == 62 {
			break
		}
	}
	return strings.Trim(cut.String(), "-")
}

// ConfigurationFile is where BuildConfiguration writes the package.
func (b *Builder) ConfigurationFile(c ConfigurationPackage) string {
	return filepath.Join(b.abs(b.OutputDir), "xpkg", fmt.Sprintf("%s-%s.xpkg", c.Name, b.Version))
}

// configurationRoot is the directory BuildConfiguration assembles the
// package root in.
func (b *Builder) configurationRoot(c ConfigurationPackage) string {
	return filepath.Join(b.abs(b.OutputDir), "configuration", c.Name+"-"+b.Version)
}

// BuildConfiguration builds c for dependencies published in registry (a
// host and an optional path, such as xpkg.example.com/widgetco): it writes
// c's metadata with dependsOn set to registry/<package> at Constraint of the
// version, the objects with their functionRef pointing at the function's
// dependency name, and runs `crossplane xpkg build`. A Configuration has no
// runtime image and no architecture.
func (b *Builder) BuildConfiguration(ctx context.Context, c ConfigurationPackage, registry string) (Artifact, error) {
	a := Artifact{Package: c.Name, Xpkg: b.ConfigurationFile(c)}
	if err := b.validate(); err != nil {
		return a, err
	}
	if b.Crank == "" {
		return a, errors.New("the Crossplane CLI (crank) is required: bash hack/tools.sh crank builds it")
	}
	t := time.Now()
	files, err := b.ConfigurationFiles(c, registry)
	if err != nil {
		return a, err
	}
	root := b.configurationRoot(c)
	if err := os.RemoveAll(root); err != nil {
		return a, errors.Wrap(err, "cannot clean the package root")
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return a, errors.Wrap(err, "cannot create the package root")
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), content, 0o600); err != nil {
			return a, errors.Wrap(err, "cannot write the package root")
		}
	}
	if err := os.MkdirAll(filepath.Dir(a.Xpkg), 0o750); err != nil {
		return a, errors.Wrap(err, "cannot create output directory")
	}
	args := []string{"xpkg", "build",
		"--package-root", root,
		"--examples-root", b.abs(c.Examples),
		"--package-file", a.Xpkg,
	}
	if len(c.Ignore) > 0 {
		args = append(args, "--ignore", strings.Join(c.Ignore, ","))
	}
	cmd := exec.CommandContext(ctx, b.Crank, args...) //nolint:gosec // runs the pinned Crossplane CLI on this repository's package
	cmd.Dir = b.RepoRoot
	if err := run(cmd); err != nil {
		return a, errors.Wrapf(err, "cannot build package %s", c.Name)
	}
	pkg, err := tarball.ImageFromPath(a.Xpkg, nil)
	if err != nil {
		return a, errors.Wrap(err, "cannot read built package")
	}
	if a.XpkgDigest, err = pkg.Digest(); err != nil {
		return a, errors.Wrap(err, "cannot compute package digest")
	}
	fi, err := os.Stat(a.Xpkg)
	if err != nil {
		return a, errors.Wrap(err, "cannot stat built package")
	}
	a.XpkgSize = fi.Size()
	a.Duration = time.Since(t)
	b.logf("built %s for %s in %s", filepath.Base(a.Xpkg), registry, since(t))
	return a, nil
}

// ConfigurationFiles returns the files of c's package root, by name, for
// dependencies published in registry: crossplane.yaml and one file per
// object.
func (b *Builder) ConfigurationFiles(c ConfigurationPackage, registry string) (map[string][]byte, error) {
	repo := func(p Package) (string, error) {
		r := strings.TrimSuffix(registry, "/") + "/" + p.Name
		if _, err := name.NewRepository(r, name.StrictValidation); err != nil || strings.Contains(registry, "://") {
			return "", errors.Errorf("registry %q is not a registry host with an optional path, such as xpkg.example.com/widgetco", registry)
		}
		return r, nil
	}
	prov, err := repo(c.Provider)
	if err != nil {
		return nil, err
	}
	fn, err := repo(c.Function)
	if err != nil {
		return nil, err
	}
	constraint, err := Constraint(b.Version)
	if err != nil {
		return nil, err
	}
	fnName, err := DependencyName(fn)
	if err != nil {
		return nil, err
	}

	meta, err := readYAML(b.abs(c.Meta))
	if err != nil {
		return nil, err
	}
	if len(meta) != 1 || meta[0]["kind"] != "Configuration" {
		return nil, errors.Errorf("%s must hold one Configuration", c.Meta)
	}
	spec, _ := meta[0]["spec"].(map[string]any)
	if spec == nil {
		return nil, errors.Errorf("%s has no spec", c.Meta)
	}
	// The build owns dependsOn: it must name exactly the two packages it
	// publishes, so that a dependency added by hand is not silently lost.
	deps, _ := spec["dependsOn"].([]any)
	seen := map[string]bool{}
	for _, d := range deps {
		m, _ := d.(map[string]any)
		ref, _ := m["package"].(string)
		ok := len(m) == 4 && m["apiVersion"] == pkgAPIVersion && m["version"] != nil
		switch {
		case ok && m["kind"] == "Provider" && strings.HasSuffix(ref, "/"+c.Provider.Name):
			seen["provider"] = true
		case ok && m["kind"] == "Function" && strings.HasSuffix(ref, "/"+c.Function.Name):
			seen["function"] = true
		}
	}
	if len(deps) != 2 || !seen["provider"] || !seen["function"] {
		return nil, errors.Errorf("%s: spec.dependsOn must name the %s Provider and the %s Function (apiVersion %s, kind, package, version) and nothing else: the build sets their registry and version constraint", c.Meta, c.Provider.Name, c.Function.Name, pkgAPIVersion)
	}
	spec["dependsOn"] = []any{
		map[string]any{"apiVersion": pkgAPIVersion, "kind": "Provider", "package": prov, "version": constraint},
		map[string]any{"apiVersion": pkgAPIVersion, "kind": "Function", "package": fn, "version": constraint},
	}
	files := map[string][]byte{}
	if files["crossplane.yaml"], err = yaml.Marshal(meta[0]); err != nil {
		return nil, errors.Wrap(err, "cannot write crossplane.yaml")
	}

	for _, f := range c.Objects {
		objs, err := readYAML(b.abs(f))
		if err != nil {
			return nil, err
		}
		var out bytes.Buffer
		for _, o := range objs {
			if o["kind"] == "Composition" {
				if err := pointFunctionRefs(o, c.FunctionRef, fnName); err != nil {
					return nil, errors.Wrapf(err, "%s", f)
				}
			}
			y, err := yaml.Marshal(o)
			if err != nil {
				return nil, errors.Wrapf(err, "cannot write %s", f)
			}
			out.WriteString("---\n")
			out.Write(y)
		}
		// examples/composition/legacy/definition.yaml -> legacy-definition.yaml
		n := strings.ReplaceAll(strings.TrimPrefix(filepath.ToSlash(filepath.Clean(f)), filepath.ToSlash(c.Examples)+"/"), "/", "-")
		if _, dup := files[n]; dup {
			return nil, errors.Errorf("two objects files map to %s", n)
		}
		files[n] = out.Bytes()
	}
	return files, nil
}

// pointFunctionRefs renames the functionRef of every pipeline step of
// Composition o from from to to, and refuses a step that calls a function
// the Configuration does not depend on.
func pointFunctionRefs(o map[string]any, from, to string) error {
	spec, _ := o["spec"].(map[string]any)
	steps, _ := spec["pipeline"].([]any)
	if len(steps) == 0 {
		return errors.New("a Composition without pipeline steps: the Configuration expects function pipelines")
	}
	for _, s := range steps {
		step, _ := s.(map[string]any)
		ref, _ := step["functionRef"].(map[string]any)
		if ref == nil || ref["name"] != from {
			return errors.Errorf("Composition %v: step %v calls function %v, which the Configuration does not depend on (only %s)", nameOf(o), step["step"], ref["name"], from)
		}
		ref["name"] = to
	}
	return nil
}

func nameOf(o map[string]any) any {
	m, _ := o["metadata"].(map[string]any)
	return m["name"]
}

// readYAML reads the YAML documents of a file as maps, skipping empty ones.
func readYAML(path string) ([]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read package source")
	}
	var out []map[string]any
	for _, doc := range splitYAML(b) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, errors.Wrapf(err, "cannot parse %s", path)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// splitYAML splits a YAML stream at its "---" document separators.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

// PublishConfiguration pushes c, which BuildConfiguration wrote, to
// registry/<name>:<version> and returns the reference it pushed. registry
// must be the one c was built for: its dependencies are there.
func (b *Builder) PublishConfiguration(ctx context.Context, c ConfigurationPackage, registry string) (string, error) {
	if err := b.validate(); err != nil {
		return "", err
	}
	if b.Crank == "" {
		return "", errors.New("the Crossplane CLI (crank) is required: bash hack/tools.sh crank builds it")
	}
	ref, err := name.NewTag(strings.TrimSuffix(registry, "/")+"/"+c.Name+":"+b.Version, name.StrictValidation)
	if err != nil || strings.Contains(registry, "://") {
		return "", errors.Errorf("registry %q is not a registry host with an optional path, such as xpkg.example.com/widgetco", registry)
	}
	f := b.ConfigurationFile(c)
	if _, err := os.Stat(f); err != nil {
		return "", errors.Wrapf(err, "cannot find package %s (build it first)", c.Name)
	}
	t := time.Now()
	//nolint:gosec // runs the pinned Crossplane CLI on this build's own package
	cmd := exec.CommandContext(ctx, b.Crank, "xpkg", "push", "--package-files", f, ref.String())
	cmd.Dir = b.RepoRoot
	if err := run(cmd); err != nil {
		return "", errors.Wrapf(err, "cannot push %s", ref)
	}
	b.logf("pushed %s in %s", ref, since(t))
	return ref.String(), nil
}
