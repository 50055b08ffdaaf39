package platform

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/package/image"
	"github.com/widgetco/crossplane-widget/test/harness"
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
	// change log (harness.ContainerLogs).
	ChangeLogsSidecar = "changelogs-sidecar"
	// ChangeLogsStandIn is the stand-in's repository and tag in the loopback
	// registry, under Org: the upstream name and tag, marked as a stand-in.
	ChangeLogsStandIn = "changelogs-sidecar-standin:v0.0.1"
)

// changeLogsRuntimeConfig is the example's file under examples/runtime.
const changeLogsRuntimeConfig = "changelogs.yaml"

// PublishChangeLogsSidecar builds the stand-in change logs sidecar from
// root's test/changelogsidecar into a runtime image for this machine and
// pushes it to h's registry. It returns the image's reference.
func PublishChangeLogsSidecar(ctx context.Context, h *harness.Harness, root string) (string, error) {
	bin := filepath.Join(h.Dir(), "bin", "changelogs-sidecar")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/changelogsidecar") //nolint:gosec // bin is a path under the harness directory.
	cmd.Dir = root
	// Static: the node runs it chrooted into its image, which has no libc.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Wrapf(err, "cannot build the stand-in change logs sidecar: %s", out)
	}
	img, err := image.Build(image.Config{
		Binary:     bin,
		Entrypoint: "/usr/local/bin/changelogs-sidecar",
		Arch:       runtime.GOARCH,
		Created:    time.Now(),
		Labels:     map[string]string{image.LabelDescription: "Stand-in for " + ChangeLogsSidecarImage + " (test/changelogsidecar)"},
	})
	if err != nil {
		return "", errors.Wrap(err, "cannot build the stand-in change logs sidecar's image")
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
