//go:build linux

package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/package/image"
)

// PauseImage is the reference of the pause image BuildPauseImage builds:
// the pods' sandbox image, and a container that prints a line and sleeps.
// Its registry host is never contacted: the image is imported, not pulled.
const PauseImage = "widget.local/node/pause:v1"

// PausePackage is the pause program's package.
const PausePackage = "github.com/widgetco/crossplane-widget/test/lib/node/pause"

// BuildPauseImage builds the pause program (static, no cgo) and packages it
// as an OCI image tagged PauseImage, the way the project builds its own
// images (package/image), in a docker archive under dir that
// `ctr images import` reads. It returns the archive's path.
func BuildPauseImage(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create the image directory")
	}
	bin := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, PausePackage) //nolint:gosec // go, on this module's package, into the caller's directory
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Errorf("cannot build %s: %v\n%s", PausePackage, err, out)
	}
	img, err := image.Build(image.Config{
		Binary:     bin,
		Entrypoint: "/pause",
		Arch:       runtime.GOARCH,
		Created:    time.Unix(0, 0),
	})
	if err != nil {
		return "", errors.Wrap(err, "cannot build the pause image")
	}
	tag, err := name.NewTag(PauseImage)
	if err != nil {
		return "", errors.Wrap(err, "cannot parse the pause image's tag")
	}
	tarball := filepath.Join(dir, "pause.tar")
	if err := image.WriteTarball(img, tag, tarball); err != nil {
		return "", err
	}
	return tarball, nil
}
