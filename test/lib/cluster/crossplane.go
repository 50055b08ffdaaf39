//go:build linux

package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// CrossplaneNamespace is where InstallCrossplane installs Crossplane.
const CrossplaneNamespace = "crossplane-system"

// CrossplaneRepository is where InstallCrossplane pushes core's image: a
// public repository of the cluster's registry (PublicRepositories), as
// Crossplane's own images are public. Were it pulled with a pull Secret,
// the chart would give that Secret to core's ServiceAccount, and core
// would fetch every package of the registry with it: no package could be
// private from core then.
const CrossplaneRepository = "crossplane/crossplane"

// PublicRepositories are the repositories of the cluster's registry that
// anyone may pull.
var PublicRepositories = []string{"crossplane/"}

// Crossplane says what to install.
type Crossplane struct {
	// Bin is core's binary ($CROSSPLANE_BIN); the chart (charts/crossplane),
	// CRDs (crds) and webhook configurations (webhookconfigurations) of
	// the same version are next to its directory, as hack/tools.sh leaves
	// them.
	Bin string
	// Version is core's version, the image's tag.
	Version string
	// Args are core's extra arguments (the chart's args value).
	Args []string
	// Values are more of the chart's values, as helm's --set takes them
	// ("key=value").
	Values []string
}

// InstallCrossplane installs Crossplane the way users do: core's image
// (built here from Bin, with the CRDs and webhook configurations the
// release image carries) in a public repository of the cluster's registry,
// and `helm install` of the chart of the same version. It waits until core
// and the RBAC manager are available, and returns core's image reference.
func (c *Cluster) InstallCrossplane(ctx context.Context, x Crossplane) (string, error) {
	t := time.Now()
	// First: a cluster that has Crossplane already is refused before
	// anything is built or pushed.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CrossplaneNamespace}}
	if err := c.Kube.Client.Create(ctx, ns); kerrors.IsAlreadyExists(err) {
		return "", errors.Errorf("namespace %s exists: is Crossplane installed already? This installs Crossplane %s itself, with its own flags; use a cluster without it", CrossplaneNamespace, x.Version)
	} else if err != nil {
		return "", errors.Wrapf(err, "cannot create namespace %s", CrossplaneNamespace)
	}
	root := filepath.Dir(filepath.Dir(x.Bin))
	img, err := BuildImage(x.Bin, "/usr/local/bin/crossplane", map[string]string{
		"/crds":                  filepath.Join(root, "crds"),
		"/webhookconfigurations": filepath.Join(root, "webhookconfigurations"),
	})
	if err != nil {
		return "", err
	}
	repo := CrossplaneRepository
	ref, err := c.Push(ctx, img, repo+":"+x.Version)
	if err != nil {
		return "", err
	}
	args := []string{
		"install", "crossplane", filepath.Join(root, "charts", "crossplane"),
		"--namespace", CrossplaneNamespace,
		"--set", "image.repository=" + c.Registry.Host + "/" + repo,
		"--set", "image.tag=" + x.Version,
		"--wait", "--timeout", "5m",
	}
	if len(x.Args) > 0 {
		args = append(args, "--set", "args={"+strings.Join(x.Args, ",")+"}")
	}
	for _, v := range x.Values {
		args = append(args, "--set", v)
	}
	if err := c.Helm(ctx, args...); err != nil {
		return "", err
	}
	for _, d := range []string{"crossplane", "crossplane-rbac-manager"} {
		if err := WaitAvailable(ctx, c.Kube.Client, CrossplaneNamespace, d, 3*time.Minute); err != nil {
			return "", err
		}
	}
	c.log.Info("Crossplane installed from its chart", "image", ref, "took", since(t))
	return ref, nil
}

// Helm runs helm against the cluster, with its cache, config and data
// under the cluster's directory; its output goes to logs/helm.log.
func (c *Cluster) Helm(ctx context.Context, args ...string) error {
	f, err := os.OpenFile(c.path("logs", "helm.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return errors.Wrap(err, "cannot open helm's log")
	}
	defer f.Close() //nolint:errcheck // written by the child only
	h := c.path("helm")
	cmd := exec.CommandContext(ctx, c.opts.Tools.Helm, append(args, "--kubeconfig", c.Kubeconfig)...) //nolint:gosec // the tool the caller named
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h, "config"),
		"HELM_DATA_HOME="+filepath.Join(h, "data"),
	)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return errors.Errorf("helm %s: %v; see %s", args[0], err, f.Name())
	}
	return nil
}
