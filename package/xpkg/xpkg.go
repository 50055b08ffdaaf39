// Package xpkg builds and publishes the Crossplane packages of
// provider-widget and function-widget without Docker.
//
// For each package and architecture a Builder cross-compiles the static
// binary (go build, CGO_ENABLED=0, -trimpath), builds its runtime image in Go
// (package image) and runs `crossplane xpkg build
// --embed-runtime-image-tarball` to add the package layer (crossplane.yaml
// and the CRDs) and the examples layer. Publish pushes the packages of every
// architecture as one multi-arch image with `crossplane xpkg push -f
// a.xpkg,b.xpkg`. The Crossplane CLI is the one hack/tools.sh builds
// (`crank`, v2.2.1).
//
// Everything a build writes is derived from the source tree, the version, the
// revision and the creation time, so building the same commit twice with the
// same Go toolchain and Crossplane CLI gives byte-identical packages.
package xpkg

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/widgetco/crossplane-widget/package/image"
)

// Source is the source repository named by the runtime images'
// org.opencontainers.image.source label (crossplane.yaml's
// meta.crossplane.io/source names it without the scheme).
const Source = "https://github.com/widgetco/crossplane-widget"

// A Package is one of the Crossplane packages this repository ships. Paths
// are relative to the repository root.
type Package struct {
	// Name of the package, its binary and its repository in a registry.
	Name string
	// Main is the Go main package of the binary.
	Main string
	// Root holds crossplane.yaml and the CRDs (crank's --package-root).
	Root string
	// Examples is the directory of example manifests (--examples-root).
	Examples string
	// Ignore are patterns, relative to Root and Examples, of YAML files
	// left out of the package (crank's --ignore).
	Ignore []string
	// Entrypoint is the binary's path in the runtime image.
	Entrypoint string
	// Ports the binary listens on by default.
	Ports []string
	// Description is the runtime image's OCI description label.
	Description string
}

// The packages this repository ships.
var (
	Provider = Package{
		Name:        "provider-widget",
		Main:        "./provider",
		Root:        "package/provider",
		Examples:    "examples/provider",
		Entrypoint:  "/usr/local/bin/provider",
		Ports:       []string{"8080/tcp", "8081/tcp"},
		Description: "Crossplane provider that manages Widgets in the Widget API",
	}
	Function = Package{
		Name:     "function-widget",
		Main:     "./function",
		Root:     "package/function",
		Examples: "examples/composition",
		// Observed resources for `crossplane render`, not manifests to
		// apply.
		Ignore:      []string{"*/observed-*.yaml"},
		Entrypoint:  "/usr/local/bin/function",
		Ports:       []string{"9443/tcp", "8080/tcp"},
		Description: "Crossplane composition function that composes XWidgets into provider-widget resources",
	}
	Packages = []Package{Provider, Function}
)

// Lookup returns the package called name.
func Lookup(name string) (Package, error) {
	for _, p := range Packages {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, 0, len(Packages))
	for _, p := range Packages {
		names = append(names, p.Name)
	}
	return Package{}, errors.Errorf("unknown package %q: want one of %s", name, strings.Join(names, ", "))
}

// A Builder builds packages. RepoRoot, OutputDir, Version, Revision and
// Crank are required; Created should be the commit time.
type Builder struct {
	// RepoRoot is the repository's root directory.
	RepoRoot string
	// OutputDir receives image/ (runtime image tarballs) and xpkg/ (the
	// packages).
	OutputDir string
	// BinDir receives linux_<arch>/<name> binaries. Default OutputDir/bin.
	BinDir string
	// Version is the packages' version, stamped into the binaries
	// (main.version), the OCI labels and the file names. It must be a valid
	// OCI tag.
	Version string
	// Revision is the commit, for the org.opencontainers.image.revision
	// label.
	Revision string
	// Created is the images' creation time and file modification time.
	Created time.Time
	// Crank is the path of the Crossplane CLI.
	Crank string
	// Go is the go command. Default "go".
	Go string
	// Log receives progress lines. Default: discarded.
	Log func(format string, args ...any)
}

// An Artifact is a built package of one architecture.
type Artifact struct {
	Package string
	Arch    string

	// Image is the runtime image tarball, ImageDigest its digest and
	// ImageSizes its sizes.
	Image       string
	ImageDigest v1.Hash
	ImageSizes  image.Sizes

	// Xpkg is the package file, XpkgDigest the digest of the image it holds
	// (pushing adds layer annotations, which changes the digest) and
	// XpkgSize its size in bytes.
	Xpkg       string
	XpkgDigest v1.Hash
	XpkgSize   int64

	// Duration is how long building the image and the package took.
	Duration time.Duration
}

// tagRE is an OCI tag, per the OCI distribution spec.
var tagRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// ValidateVersion returns an error unless v can be an OCI tag, which the
// package's version must be to be pushed.
func ValidateVersion(v string) error {
	if !tagRE.MatchString(v) {
		return errors.Errorf("version %q is not a valid OCI tag (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')", v)
	}
	return nil
}

func (b *Builder) validate() error {
	switch {
	case b.RepoRoot == "":
		return errors.New("repository root is required")
	case b.OutputDir == "":
		return errors.New("output directory is required")
	case b.Revision == "":
		return errors.New("revision is required")
	}
	return ValidateVersion(b.Version)
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		b.Log(format, args...)
	}
}

func (b *Builder) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.RepoRoot, p)
}

// Binary is where Compile writes p's binary for arch.
func (b *Builder) Binary(p Package, arch string) string {
	d := b.BinDir
	if d == "" {
		d = filepath.Join(b.OutputDir, "bin")
	}
	return filepath.Join(b.abs(d), "linux_"+arch, p.Name)
}

// ImageTarball is where Build writes p's runtime image for arch.
func (b *Builder) ImageTarball(p Package, arch string) string {
	return filepath.Join(b.abs(b.OutputDir), "image", fmt.Sprintf("%s-%s-%s.tar", p.Name, b.Version, arch))
}

// XpkgFile is where Build writes p's package for arch.
func (b *Builder) XpkgFile(p Package, arch string) string {
	return filepath.Join(b.abs(b.OutputDir), "xpkg", fmt.Sprintf("%s-%s-%s.xpkg", p.Name, b.Version, arch))
}

// Compile cross-compiles p's static linux binary for arch into
// Binary(p, arch). The build is reproducible: -trimpath, no VCS stamping,
// the version through -ldflags, and a pinned GOAMD64/GOARM64 baseline so the
// binary runs on every CPU of the architecture.
func (b *Builder) Compile(ctx context.Context, p Package, arch string) error {
	if err := b.validate(); err != nil {
		return err
	}
	out := b.Binary(p, arch)
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return errors.Wrap(err, "cannot create binary directory")
	}
	goBin := b.Go
	if goBin == "" {
		goBin = "go"
	}
	t := time.Now()
	//nolint:gosec // runs the go command on this repository's own main packages
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+b.Version, "-o", out, p.Main)
	cmd.Dir = b.RepoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOAMD64=v1", "GOARM64=v8.0")
	if err := run(cmd); err != nil {
		return errors.Wrapf(err, "cannot compile %s for linux/%s", p.Name, arch)
	}
	b.logf("compiled %s for linux/%s in %s", p.Name, arch, since(t))
	return nil
}

// Labels are the OCI labels of p's runtime image.
func (b *Builder) Labels(p Package) map[string]string {
	return map[string]string{
		image.LabelCreated:     b.Created.UTC().Format(time.RFC3339),
		image.LabelDescription: p.Description,
		image.LabelLicenses:    "Apache-2.0",
		image.LabelRevision:    b.Revision,
		image.LabelSource:      Source,
		image.LabelTitle:       p.Name,
		image.LabelVersion:     b.Version,
	}
}

// Build builds p's runtime image for arch from the binary Compile wrote and
// then its package with `crossplane xpkg build`. Builds of different
// packages or architectures may run concurrently.
func (b *Builder) Build(ctx context.Context, p Package, arch string) (Artifact, error) {
	a := Artifact{Package: p.Name, Arch: arch, Image: b.ImageTarball(p, arch), Xpkg: b.XpkgFile(p, arch)}
	if err := b.readyToRun(); err != nil {
		return a, err
	}
	t := time.Now()

	img, err := image.Build(image.Config{
		Binary:     b.Binary(p, arch),
		Entrypoint: p.Entrypoint,
		Arch:       arch,
		Created:    b.Created,
		Labels:     b.Labels(p),
		Ports:      p.Ports,
	})
	if err != nil {
		return a, errors.Wrapf(err, "cannot build runtime image of %s for linux/%s", p.Name, arch)
	}
	if a.ImageDigest, err = img.Digest(); err != nil {
		return a, errors.Wrap(err, "cannot compute runtime image digest")
	}
	if a.ImageSizes, err = image.Measure(img); err != nil {
		return a, errors.Wrap(err, "cannot measure runtime image")
	}
	// The tag only names the image for `docker load`; crank ignores it.
	tag, err := name.NewTag(fmt.Sprintf("%s:%s-%s", p.Name, b.Version, arch))
	if err != nil {
		return a, errors.Wrap(err, "cannot tag runtime image")
	}
	for _, d := range []string{filepath.Dir(a.Image), filepath.Dir(a.Xpkg)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return a, errors.Wrap(err, "cannot create output directory")
		}
	}
	if err := image.WriteTarball(img, tag, a.Image); err != nil {
		return a, errors.Wrapf(err, "cannot write runtime image of %s for linux/%s", p.Name, arch)
	}

	args := []string{
		"--package-root", b.abs(p.Root),
		"--examples-root", b.abs(p.Examples),
		"--embed-runtime-image-tarball", a.Image,
		"--package-file", a.Xpkg,
	}
	if len(p.Ignore) > 0 {
		args = append(args, "--ignore", strings.Join(p.Ignore, ","))
	}
	if err := b.crankBuild(ctx, &a, args); err != nil {
		return a, errors.Wrapf(err, "cannot build package %s for linux/%s", p.Name, arch)
	}
	a.Duration = time.Since(t)
	b.logf("built %s for linux/%s in %s", filepath.Base(a.Xpkg), arch, since(t))
	return a, nil
}

// crankBuild runs `crossplane xpkg build` with args, which must write
// a.Xpkg, and records the package's digest and size in a.
func (b *Builder) crankBuild(ctx context.Context, a *Artifact, args []string) error {
	cmd := exec.CommandContext(ctx, b.Crank, append([]string{"xpkg", "build"}, args...)...) //nolint:gosec // runs the pinned Crossplane CLI on this repository's package
	cmd.Dir = b.RepoRoot
	if err := run(cmd); err != nil {
		return err
	}
	pkg, err := tarball.ImageFromPath(a.Xpkg, nil)
	if err != nil {
		return errors.Wrap(err, "cannot read built package")
	}
	if a.XpkgDigest, err = pkg.Digest(); err != nil {
		return errors.Wrap(err, "cannot compute package digest")
	}
	fi, err := os.Stat(a.Xpkg)
	if err != nil {
		return errors.Wrap(err, "cannot stat built package")
	}
	a.XpkgSize = fi.Size()
	return nil
}

// Publish pushes p's packages of archs, which Build wrote, to
// registry/<name>:<version> with `crossplane xpkg push`: each package by
// digest and an OCI image index of them under the tag. registry is a host
// and an optional path, such as xpkg.example.com/widgetco. It returns the
// reference it pushed.
func (b *Builder) Publish(ctx context.Context, p Package, archs []string, registry string) (string, error) {
	if err := b.readyToRun(); err != nil {
		return "", err
	}
	ref, err := tagIn(registry, p.Name, b.Version)
	if err != nil {
		return "", err
	}
	files := make([]string, 0, len(archs))
	for _, arch := range archs {
		f := b.XpkgFile(p, arch)
		if _, err := os.Stat(f); err != nil {
			return "", errors.Wrapf(err, "cannot find package %s for linux/%s (build it first)", p.Name, arch)
		}
		files = append(files, f)
	}
	t := time.Now()
	if err := b.push(ctx, files, ref); err != nil {
		return "", err
	}
	b.logf("pushed %s (%s) in %s", ref, strings.Join(archs, ", "), since(t))
	return ref.String(), nil
}

// push pushes package files to ref with `crossplane xpkg push`: one file as
// an image, several as an image index.
func (b *Builder) push(ctx context.Context, files []string, ref name.Tag) error {
	//nolint:gosec // runs the pinned Crossplane CLI on this build's own packages
	cmd := exec.CommandContext(ctx, b.Crank, "xpkg", "push", "--package-files", strings.Join(files, ","), ref.String())
	cmd.Dir = b.RepoRoot
	return errors.Wrapf(run(cmd), "cannot push %s", ref)
}

// readyToRun checks the builder and that it has the Crossplane CLI.
func (b *Builder) readyToRun() error {
	if err := b.validate(); err != nil {
		return err
	}
	if b.Crank == "" {
		return errors.New("the Crossplane CLI (crank) is required: bash hack/tools.sh crank builds it")
	}
	return nil
}

// repositoryIn is the repository of package pkg in registry, a host and an
// optional path such as xpkg.example.com/widgetco.
func repositoryIn(registry, pkg string) (name.Repository, error) {
	r, err := name.NewRepository(strings.TrimSuffix(registry, "/")+"/"+pkg, name.StrictValidation)
	if err != nil || strings.Contains(registry, "://") {
		return name.Repository{}, errors.Errorf("registry %q is not a registry host with an optional path, such as xpkg.example.com/widgetco", registry)
	}
	return r, nil
}

// tagIn is package pkg's version in registry.
func tagIn(registry, pkg, version string) (name.Tag, error) {
	r, err := repositoryIn(registry, pkg)
	if err != nil {
		return name.Tag{}, err
	}
	return r.Tag(version), nil
}

// run runs cmd and returns an error that includes its output when it fails.
func run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if o := strings.TrimSpace(out.String()); o != "" {
			return errors.Wrapf(err, "%s: %s", filepath.Base(cmd.Path), o)
		}
		return errors.Wrap(err, filepath.Base(cmd.Path))
	}
	return nil
}

func since(t time.Time) time.Duration {
	return time.Since(t).Round(100 * time.Millisecond)
}
