package platform

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgimage "github.com/widgetco/crossplane-widget/package/image"
)

// PackageBuild describes a `crossplane xpkg build`.
type PackageBuild struct {
	// Root is the directory holding crossplane.yaml and the package's YAML
	// (CRDs, ...).
	Root string
	// Out is the package file to write.
	Out string
	// ExamplesRoot is the directory of examples to include (default: none).
	ExamplesRoot string
	// EmbedRuntimeImageTarball optionally names an OCI image tarball to
	// embed as the package's runtime.
	EmbedRuntimeImageTarball string
	// RuntimeBinary, instead of EmbedRuntimeImageTarball, is a static Linux
	// binary for this machine's architecture: BuildPackage builds a runtime
	// image of it (package/image: entrypoint /usr/local/bin/<name>, user
	// 65532) and embeds that. Crossplane's Deployment runtime runs the
	// package's image, so a Function or Provider package needs one of the
	// two.
	RuntimeBinary string
}

// BuildFunction builds a Function package named name for a function's
// static Linux binary, with the smallest crossplane.yaml Crossplane v2
// accepts, under dir, and returns the package file's path: an upstream
// function (function-auto-ready, function-patch-and-transform) as a
// package.
func BuildFunction(ctx context.Context, crank, dir, name, bin string) (string, error) {
	root := filepath.Join(dir, "pkg-"+name)
	if err := os.MkdirAll(root, 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create the package directory")
	}
	meta := "apiVersion: meta.pkg.crossplane.io/v1beta1\nkind: Function\nmetadata:\n  name: " + name + "\nspec:\n  crossplane:\n    version: \">=v2.0.0\"\n"
	if err := os.WriteFile(filepath.Join(root, "crossplane.yaml"), []byte(meta), 0o600); err != nil {
		return "", errors.Wrap(err, "cannot write crossplane.yaml")
	}
	out := filepath.Join(dir, name+".xpkg")
	return out, BuildPackage(ctx, crank, PackageBuild{Root: root, Out: out, RuntimeBinary: bin})
}

// BuildPackage runs `crank xpkg build` (the Crossplane CLI) for b.
func BuildPackage(ctx context.Context, crank string, b PackageBuild) error {
	if crank == "" {
		return errors.New("CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	examples := b.ExamplesRoot
	if examples == "" {
		// crank's default is ./examples; point it somewhere empty instead.
		d, err := os.MkdirTemp("", "xpkg-no-examples-")
		if err != nil {
			return errors.Wrap(err, "cannot create empty examples directory")
		}
		defer os.RemoveAll(d) //nolint:errcheck // Best-effort cleanup of an empty dir.
		examples = d
	}
	if err := os.MkdirAll(filepath.Dir(b.Out), 0o750); err != nil {
		return errors.Wrap(err, "cannot create package output directory")
	}
	args := []string{"xpkg", "build", "--package-root=" + b.Root, "--package-file=" + b.Out, "--examples-root=" + examples}
	if b.RuntimeBinary != "" {
		tb, err := runtimeImageTarball(b.RuntimeBinary, b.Out+".image.tar")
		if err != nil {
			return err
		}
		defer os.Remove(tb) //nolint:errcheck // Best-effort cleanup.
		b.EmbedRuntimeImageTarball = tb
	}
	if b.EmbedRuntimeImageTarball != "" {
		args = append(args, "--embed-runtime-image-tarball="+b.EmbedRuntimeImageTarball)
	}
	out, err := exec.CommandContext(ctx, crank, args...).CombinedOutput() //nolint:gosec // the Crossplane CLI the caller named
	if err != nil {
		return errors.Wrapf(err, "cannot build package from %s: %s", b.Root, tail(out, 5))
	}
	return nil
}

// runtimeImageTarball builds the runtime image of a binary and writes it as
// a tarball to file.
func runtimeImageTarball(bin, file string) (string, error) {
	img, err := pkgimage.Build(pkgimage.Config{
		Binary:     bin,
		Entrypoint: "/usr/local/bin/" + filepath.Base(bin),
		Arch:       runtime.GOARCH,
		Created:    time.Unix(0, 0),
	})
	if err != nil {
		return "", errors.Wrapf(err, "cannot build a runtime image of %s", bin)
	}
	tag, err := name.NewTag("runtime.local/" + strings.ToLower(filepath.Base(bin)) + ":latest")
	if err != nil {
		return "", errors.Wrap(err, "cannot tag the runtime image")
	}
	return file, pkgimage.WriteTarball(img, tag, file)
}

// tail returns the last n non-empty lines of out, joined with " | ".
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(out, nil))), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
