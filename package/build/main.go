// Command build builds the runtime images and Crossplane packages (.xpkg) of
// provider-widget and function-widget and the configuration-widget package
// that depends on them, without Docker, and publishes them.
//
//	go run ./package/build xpkg --crank "$(bash hack/tools.sh path crank)"
//	go run ./package/build publish --registry xpkg.example.com/widgetco --crank ... --sign-key cosign.key
//	go run ./package/build version
//	go run ./package/build image --package provider-widget --arch arm64 \
//	    --binary _output/bin/linux_arm64/provider-widget --out provider.tar
//
// Run it from the repository root (or pass --repo-root). The version,
// revision and creation time default to a semantic version derived from git
// (see xpkg.Semver), the checked-out commit and its commit time (SOURCE_DATE_EPOCH
// overrides the time), so building a commit twice gives the same digests.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/errgroup"

	"github.com/widgetco/crossplane-widget/package/image"
	"github.com/widgetco/crossplane-widget/package/sign"
	"github.com/widgetco/crossplane-widget/package/xpkg"
)

// commitFlags say what is being built. Unset ones come from git.
type commitFlags struct {
	RepoRoot        string `default:"."    help:"Repository root." type:"existingdir"`
	Version         string `help:"Semantic version of the packages: binaries' main.version, OCI labels, file names, the pushed tag and the Configuration's dependency constraints (default: derived from git, see the version command)."`
	Revision        string `help:"Commit for the org.opencontainers.image.revision label (default: git rev-parse HEAD)."`
	SourceDateEpoch string `env:"SOURCE_DATE_EPOCH" help:"Creation time of the images and their files, in Unix seconds (default: the commit time)."`
}

// builder returns a Builder for the commit the flags describe.
func (c *commitFlags) builder(ctx context.Context, out string, log io.Writer) (*xpkg.Builder, error) {
	root, err := filepath.Abs(c.RepoRoot)
	if err != nil {
		return nil, errors.Wrap(err, "cannot resolve repository root")
	}
	b := &xpkg.Builder{
		RepoRoot:  root,
		OutputDir: out,
		Version:   c.Version,
		Revision:  c.Revision,
		Log: func(format string, args ...any) {
			_, _ = fmt.Fprintf(log, "build: "+format+"\n", args...)
		},
	}
	if c.SourceDateEpoch != "" {
		if b.Created, err = xpkg.ParseEpoch(c.SourceDateEpoch); err != nil {
			return nil, errors.Wrap(err, "cannot parse SOURCE_DATE_EPOCH")
		}
	}
	if b.Version != "" && b.Revision != "" && c.SourceDateEpoch != "" {
		return b, nil
	}
	gc, err := xpkg.FromGit(ctx, root)
	if err != nil {
		return nil, errors.Wrap(err, "cannot describe the commit (pass --version, --revision and SOURCE_DATE_EPOCH outside a git work tree)")
	}
	if b.Version == "" {
		b.Version = gc.Version
	}
	if b.Revision == "" {
		b.Revision = gc.Revision
	}
	if c.SourceDateEpoch == "" {
		b.Created = gc.Time
	}
	return b, nil
}

// packageFlags select packages and architectures.
type packageFlags struct {
	Package []string `default:"provider-widget,function-widget,configuration-widget" help:"Packages to build." enum:"provider-widget,function-widget,configuration-widget"`
	Arch    []string `default:"amd64,arm64"                                          help:"Architectures (GOARCH) to build the provider and function for."   enum:"amd64,arm64"`
}

// Validate refuses a package or architecture named twice, which would build
// the same files concurrently.
func (f *packageFlags) Validate() error {
	seen := map[string]bool{}
	for _, v := range append(append([]string{}, f.Package...), f.Arch...) {
		if seen[v] {
			return errors.Errorf("%s is named twice", v)
		}
		seen[v] = true
	}
	return nil
}

// packages returns the selected packages with a runtime, and whether the
// Configuration is selected.
func (f *packageFlags) packages() ([]xpkg.Package, bool, error) {
	ps := make([]xpkg.Package, 0, len(f.Package))
	config := false
	for _, n := range f.Package {
		if n == xpkg.Configuration.Name {
			config = true
			continue
		}
		p, err := xpkg.Lookup(n)
		if err != nil {
			return nil, false, err
		}
		ps = append(ps, p)
	}
	return ps, config, nil
}

type xpkgCmd struct {
	commitFlags
	packageFlags

	OutputDir string `default:"_output" help:"Directory for image/ (runtime image tarballs) and xpkg/ (packages)."`
	Registry  string `default:"${default_registry}" help:"Registry and path the Configuration's dependencies are published to (make publish pushes there)."`
	BinDir    string `help:"Directory for linux_<arch>/<package> binaries (default: <output-dir>/bin)."`
	NoCompile bool   `help:"Use the binaries already in --bin-dir instead of compiling them."`
	Crank     string `env:"CRANK_BIN" help:"The Crossplane CLI (bash hack/tools.sh path crank)." required:""`
}

func (c *xpkgCmd) Run(e *env) error {
	ctx, stdout, stderr := e.ctx, e.stdout, e.stderr
	b, err := c.builder(ctx, c.OutputDir, stderr)
	if err != nil {
		return err
	}
	b.BinDir, b.Crank = c.BinDir, c.Crank
	ps, config, err := c.packages()
	if err != nil {
		return err
	}
	t := time.Now()
	if !c.NoCompile {
		for _, p := range ps {
			for _, arch := range c.Arch {
				if err := b.Compile(ctx, p, arch); err != nil {
					return err
				}
			}
		}
	}
	// Packaging is mostly compressing the binaries: one per CPU at a time.
	n := len(ps) * len(c.Arch)
	arts := make([]xpkg.Artifact, n, n+1)
	if config {
		arts = arts[:n+1]
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i, p := range ps {
		for j, arch := range c.Arch {
			g.Go(func() error {
				a, err := b.Build(gctx, p, arch)
				arts[i*len(c.Arch)+j] = a
				return err
			})
		}
	}
	if config {
		g.Go(func() error {
			a, err := b.BuildConfiguration(gctx, xpkg.Configuration, c.Registry)
			a.Arch = "-"
			arts[n] = a
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	b.Log("built %d packages of version %s in %s", len(arts), b.Version, time.Since(t).Round(time.Second))
	return summary(stdout, c.RepoRoot, arts)
}

// summary prints what xpkg built, with sizes in MB (10^6 bytes).
func summary(w io.Writer, root string, arts []xpkg.Artifact) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "PACKAGE\tARCH\tIMAGE (COMPRESSED)\tIMAGE (UNCOMPRESSED)\tXPKG FILE\tTIME\tPATH")
	for _, a := range arts {
		p := a.Xpkg
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			p = r
		}
		compressed, uncompressed := mb(a.ImageSizes.Compressed), mb(a.ImageSizes.Uncompressed)
		if a.Image == "" { // a Configuration has no runtime image
			compressed, uncompressed = "-", "-"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Package, a.Arch,
			compressed, uncompressed, mb(a.XpkgSize), a.Duration.Round(100*time.Millisecond), p)
	}
	return errors.Wrap(tw.Flush(), "cannot print summary")
}

// mb formats a size in MB (10^6 bytes), or in kB when it is below 0.1 MB.
func mb(n int64) string {
	if n < 100_000 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

type publishCmd struct {
	commitFlags
	packageFlags

	Registry   string `help:"Registry and path to push to, such as xpkg.example.com/widgetco: packages go to <registry>/<package>:<version>." required:""`
	OutputDir  string `default:"_output" help:"Directory that xpkg wrote the packages to."`
	BinDir     string `help:"Directory of the linux_<arch>/<package> binaries xpkg packaged, which the SBOM describes (default: <output-dir>/bin)."`
	AllowDirty bool   `help:"Publish a version built from a work tree with uncommitted changes."`
	Crank      string `env:"CRANK_BIN" help:"The Crossplane CLI (bash hack/tools.sh path crank)." required:""`

	SignKey  string `env:"COSIGN_KEY" help:"cosign private key that signs each package and its SBOM and provenance attestations: a key file (its password in COSIGN_PASSWORD) or a KMS URI (awskms://, gcpkms://, azurekms://, hashivault://). Required unless --unsigned."`
	Unsigned bool   `help:"Publish without signatures: nothing can then prove the packages are the ones built here."`
	Cosign   string `env:"COSIGN_BIN" help:"cosign (bash hack/tools.sh path cosign), to sign."`
}

// signer is how publish signs, or nil with --unsigned.
func (c *publishCmd) signer() (*xpkg.Signer, error) {
	switch {
	case c.Unsigned && c.SignKey != "":
		return nil, errors.New("--unsigned and a signing key (--sign-key or COSIGN_KEY) contradict each other: drop one")
	case c.Unsigned:
		return nil, nil
	case c.SignKey == "":
		return nil, errors.New("say how to sign the packages: --sign-key (or COSIGN_KEY) names a cosign key file or KMS URI (cosign generate-key-pair makes one; docs/install.md), or --unsigned publishes them unsigned")
	case c.Cosign == "":
		return nil, errors.New("signing needs cosign: bash hack/tools.sh cosign builds it, and COSIGN_BIN (or --cosign) names it")
	}
	return &xpkg.Signer{Cosign: sign.Cosign{Bin: c.Cosign, Password: os.Getenv("COSIGN_PASSWORD")}, Key: c.SignKey}, nil
}

func (c *publishCmd) Run(e *env) error {
	ctx, stdout, stderr := e.ctx, e.stdout, e.stderr
	b, err := c.builder(ctx, c.OutputDir, stderr)
	if err != nil {
		return err
	}
	b.Crank, b.BinDir = c.Crank, c.BinDir
	if xpkg.Dirty(b.Version) && !c.AllowDirty {
		return errors.Errorf("version %s was built from uncommitted changes: commit (and tag) first, or pass --allow-dirty", b.Version)
	}
	signer, err := c.signer()
	if err != nil {
		return err
	}
	ps, config, err := c.packages()
	if err != nil {
		return err
	}
	// signed signs what was published at ref, when publish signs.
	signed := func(pkg string, archs []string, ref string) error {
		if signer == nil {
			return nil
		}
		_, err := b.Sign(ctx, *signer, pkg, archs, c.Registry, ref)
		return err
	}
	// Dependencies first: a Configuration in the registry can always be
	// resolved.
	for _, p := range ps {
		ref, err := b.Publish(ctx, p, c.Arch, c.Registry)
		if err != nil {
			return err
		}
		if err := signed(p.Name, c.Arch, ref); err != nil {
			return err
		}
		_, _ = fmt.Fprintln(stdout, ref)
	}
	if !config {
		return nil
	}
	// Built again for this registry: its dependsOn names it.
	if _, err := b.BuildConfiguration(ctx, xpkg.Configuration, c.Registry); err != nil {
		return err
	}
	ref, err := b.PublishConfiguration(ctx, xpkg.Configuration, c.Registry)
	if err != nil {
		return err
	}
	if err := signed(xpkg.Configuration.Name, nil, ref); err != nil {
		return err
	}
	_, _ = fmt.Fprintln(stdout, ref)
	return nil
}

type versionCmd struct {
	RepoRoot string `default:"." help:"Repository root." type:"existingdir"`
}

func (c *versionCmd) Run(e *env) error {
	gc, err := xpkg.FromGit(e.ctx, c.RepoRoot)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintln(e.stdout, gc.Version)
	return nil
}

type imageCmd struct {
	commitFlags

	Package string `help:"Package whose runtime image to build (sets entrypoint, ports and labels)." enum:"provider-widget,function-widget" required:""`
	Arch    string `help:"Architecture (GOARCH) of the binary." enum:"amd64,arm64" required:""`
	Binary  string `help:"Static linux binary of the package." type:"existingfile" required:""`
	Out     string `help:"Image tarball to write (docker save format)." required:""`
}

func (c *imageCmd) Run(e *env) error {
	ctx, stdout, stderr := e.ctx, e.stdout, e.stderr
	b, err := c.builder(ctx, ".", stderr)
	if err != nil {
		return err
	}
	if err := xpkg.ValidateVersion(b.Version); err != nil {
		return err
	}
	p, err := xpkg.Lookup(c.Package)
	if err != nil {
		return err
	}
	img, err := image.Build(image.Config{
		Binary:     c.Binary,
		Entrypoint: p.Entrypoint,
		Arch:       c.Arch,
		Created:    b.Created,
		Labels:     b.Labels(p),
		Ports:      p.Ports,
	})
	if err != nil {
		return err
	}
	tag, err := name.NewTag(fmt.Sprintf("%s:%s-%s", p.Name, b.Version, c.Arch))
	if err != nil {
		return errors.Wrap(err, "cannot tag image")
	}
	if err := image.WriteTarball(img, tag, c.Out); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return errors.Wrap(err, "cannot compute image digest")
	}
	_, _ = fmt.Fprintf(stdout, "%s %s %s\n", c.Out, tag, d)
	return nil
}

// env is what every command runs with.
type env struct {
	ctx            context.Context // kong binds one value per type, so Run gets the signal context here
	stdout, stderr io.Writer
}

type cli struct {
	Xpkg    xpkgCmd    `cmd:"" help:"Compile the binaries and build the runtime images and .xpkg packages (_output/xpkg/<package>-<version>-<arch>.xpkg, configuration-widget-<version>.xpkg)."`
	Publish publishCmd `cmd:"" help:"Push the packages xpkg built as multi-arch images (crossplane xpkg push -f a.xpkg,b.xpkg), then the Configuration built for the registry."`
	Image   imageCmd   `cmd:"" help:"Build one runtime image tarball from a static binary."`
	Version versionCmd `cmd:"" help:"Print the semantic version builds of the checked-out commit get."`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	k := kong.Parse(&cli{},
		kong.Name("build"),
		kong.Description("Build and publish the Crossplane packages of provider-widget, function-widget and configuration-widget without Docker."),
		kong.Vars{"default_registry": xpkg.DefaultRegistry},
		kong.UsageOnError())
	err := k.Run(&env{ctx: ctx, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	k.FatalIfErrorf(err)
}
