package xpkg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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
	if err := b.readyToRun(); err != nil {
		return a, err
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
	args := []string{
		"--package-root", root,
		"--examples-root", b.abs(c.Examples),
		"--package-file", a.Xpkg,
	}
	if len(c.Ignore) > 0 {
		args = append(args, "--ignore", strings.Join(c.Ignore, ","))
	}
	if err := b.crankBuild(ctx, &a, args); err != nil {
		return a, errors.Wrapf(err, "cannot build package %s", c.Name)
	}
	a.Duration = time.Since(t)
	b.logf("built %s for %s in %s", filepath.Base(a.Xpkg), registry, since(t))
	return a, nil
}

// ConfigurationFiles returns the files of c's package root, by name, for
// dependencies published in registry: crossplane.yaml and one file per
// object.
func (b *Builder) ConfigurationFiles(c ConfigurationPackage, registry string) (map[string][]byte, error) {
	prov, err := repositoryIn(registry, c.Provider.Name)
	if err != nil {
		return nil, err
	}
	fn, err := repositoryIn(registry, c.Function.Name)
	if err != nil {
		return nil, err
	}
	constraint, err := Constraint(b.Version)
	if err != nil {
		return nil, err
	}
	fnName := toDNSLabel(fn.RepositoryStr())

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
	if !namesOwnPackages(deps, c) {
		return nil, errors.Errorf("%s: spec.dependsOn must name the %s Provider and the %s Function (apiVersion %s, kind, package, version) and nothing else: the build sets their registry and version constraint", c.Meta, c.Provider.Name, c.Function.Name, pkgAPIVersion)
	}
	spec["dependsOn"] = []any{
		map[string]any{"apiVersion": pkgAPIVersion, "kind": "Provider", "package": prov.String(), "version": constraint},
		map[string]any{"apiVersion": pkgAPIVersion, "kind": "Function", "package": fn.String(), "version": constraint},
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

// namesOwnPackages reports whether deps, a Configuration's spec.dependsOn,
// names c's Provider and c's Function (apiVersion, kind, package, version)
// and nothing else.
func namesOwnPackages(deps []any, c ConfigurationPackage) bool {
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
	return len(deps) == 2 && seen["provider"] && seen["function"]
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
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []map[string]any
	for {
		var m map[string]any
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot parse %s", path)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}

// PublishConfiguration pushes c, which BuildConfiguration wrote, to
// registry/<name>:<version> and returns the reference it pushed. registry
// must be the one c was built for: its dependencies are there.
func (b *Builder) PublishConfiguration(ctx context.Context, c ConfigurationPackage, registry string) (string, error) {
	if err := b.readyToRun(); err != nil {
		return "", err
	}
	ref, err := tagIn(registry, c.Name, b.Version)
	if err != nil {
		return "", err
	}
	f := b.ConfigurationFile(c)
	if _, err := os.Stat(f); err != nil {
		return "", errors.Wrapf(err, "cannot find package %s (build it first)", c.Name)
	}
	t := time.Now()
	if err := b.push(ctx, []string{f}, ref); err != nil {
		return "", err
	}
	b.logf("pushed %s in %s", ref, since(t))
	return ref.String(), nil
}
