package platform

import (
	"compress/gzip"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/package/image"
)

// Change logs: examples/runtime/changelogs.yaml is provider-widget's
// DeploymentRuntimeConfig with --enable-changelogs, Crossplane's change logs
// sidecar and the volume they share. With Options.ChangeLogs, Install uses
// it in place of the one in deploymentruntimeconfigs.yaml, with the stand-in
// sidecar (test/changelogsidecar) in place of the upstream image, which
// cannot be pulled here.
const (
	// ChangeLogsSidecarImage is the upstream sidecar image the example names.
	ChangeLogsSidecarImage = "xpkg.crossplane.io/crossplane/changelogs-sidecar:v0.0.1"
	// ChangeLogsSidecar is the sidecar's container name: its log is the
	// change log (cluster.ContainerLogs).
	ChangeLogsSidecar = "changelogs-sidecar"
	// ChangeLogsStandIn is the stand-in's repository and tag in the loopback
	// registry, under Org: the upstream name and tag, marked as a stand-in.
	ChangeLogsStandIn = "changelogs-sidecar-standin:v0.0.1"
)

// changeLogsRuntimeConfig is the example's file under examples/runtime.
const changeLogsRuntimeConfig = "changelogs.yaml"

// BuildChangeLogsSidecar compiles root's test/changelogsidecar into bin, a
// static binary for this machine, and builds its runtime image. It needs no
// control plane, so a caller may run it while one starts
// (StartChangeLogsSidecarBuild): the image's layers are compressed here,
// which in a test binary built with -race takes seconds.
func BuildChangeLogsSidecar(ctx context.Context, root, bin string) (v1.Image, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/changelogsidecar")
	cmd.Dir = root
	// Static: the node runs it chrooted into its image, which has no libc.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, errors.Wrapf(err, "cannot build the stand-in change logs sidecar: %s", out)
	}
	img, err := image.Build(image.Config{
		Binary:     bin,
		Entrypoint: "/usr/local/bin/changelogs-sidecar",
		Arch:       runtime.GOARCH,
		Created:    time.Now(),
		Labels:     map[string]string{image.LabelDescription: "Stand-in for " + ChangeLogsSidecarImage + " (test/changelogsidecar)"},
		// A throwaway image: best compression took 20-50 s of a test binary
		// built with -race on a busy machine.
		Compression: gzip.BestSpeed,
	})
	return img, errors.Wrap(err, "cannot build the stand-in change logs sidecar's image")
}

// StartChangeLogsSidecarBuild starts BuildChangeLogsSidecar and returns at
// once; the function it returns waits for the build. Use it as
// Options.ChangeLogsSidecar. log hears how long the build took.
func StartChangeLogsSidecarBuild(ctx context.Context, log *slog.Logger, root, bin string) func() (v1.Image, error) {
	type result struct {
		img v1.Image
		err error
	}
	done := make(chan result, 1)
	go func() {
		t := time.Now()
		img, err := BuildChangeLogsSidecar(ctx, root, bin)
		log.Info("Change logs stand-in built", "duration", since(t), "error", err)
		done <- result{img, err}
	}()
	var once sync.Once
	var r result
	return func() (v1.Image, error) {
		once.Do(func() { r = <-done })
		return r.img, r.err
	}
}

// PublishChangeLogsSidecar pushes the stand-in change logs sidecar's image
// to h's registry and returns its reference. The image is built(), or built
// from root's test/changelogsidecar when built is nil.
func PublishChangeLogsSidecar(ctx context.Context, h ControlPlane, root string, built func() (v1.Image, error)) (string, error) {
	if built == nil {
		built = func() (v1.Image, error) {
			return BuildChangeLogsSidecar(ctx, root, filepath.Join(h.Dir(), "bin", "changelogs-sidecar"))
		}
	}
	img, err := built()
	if err != nil {
		return "", err
	}
	full, err := h.PushImage(ctx, img, ChangeLogsStandIn)
	if err != nil {
		return "", errors.Wrap(err, "cannot push the stand-in change logs sidecar")
	}
	return full, nil
}

// withChangeLogs returns objs with provider-widget's DeploymentRuntimeConfig
// replaced by examples/runtime/changelogs.yaml's, whose sidecar runs the
// image standIn.
func withChangeLogs(root string, objs []*unstructured.Unstructured, standIn string) ([]*unstructured.Unstructured, error) {
	cl, err := ReadObjects(filepath.Join(root, "examples", "runtime", changeLogsRuntimeConfig))
	if err != nil {
		return nil, err
	}
	if len(cl) != 1 || cl[0].GetName() != ProviderRuntimeConfig {
		return nil, errors.Errorf("examples/runtime/%s must hold exactly the DeploymentRuntimeConfig %s", changeLogsRuntimeConfig, ProviderRuntimeConfig)
	}
	drc := cl[0]
	cs, _, _ := unstructured.NestedSlice(drc.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	replaced := false
	for i, c := range cs {
		ctr, _ := c.(map[string]any)
		if ctr["image"] == ChangeLogsSidecarImage {
			ctr["image"] = standIn
			cs[i] = ctr
			replaced = true
		}
	}
	if !replaced {
		return nil, errors.Errorf("examples/runtime/%s runs no container of %s, which the stand-in replaces", changeLogsRuntimeConfig, ChangeLogsSidecarImage)
	}
	if err := unstructured.SetNestedSlice(drc.Object, cs, "spec", "deploymentTemplate", "spec", "template", "spec", "containers"); err != nil {
		return nil, errors.Wrap(err, "cannot set the stand-in sidecar's image")
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o.GetName() == ProviderRuntimeConfig {
			o = drc
		}
		out = append(out, o)
	}
	return out, nil
}
