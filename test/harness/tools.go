package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// ErrToolsMissing is returned (wrapped) by ToolsFromEnv and Start when a
// binary the harness needs is not configured. Tests check it with errors.Is
// to skip rather than fail on machines without the tools.
var ErrToolsMissing = errors.New("test tools are missing: run `make tools` (or `bash hack/tools.sh all`) and `eval \"$(bash hack/tools.sh env)\"`")

// Tools are the out-of-tree binaries the harness runs. hack/tools.sh builds
// and caches them; `bash hack/tools.sh env` exports the variables that
// ToolsFromEnv reads.
type Tools struct {
	// KubebuilderAssets is a directory holding etcd and kube-apiserver
	// ($KUBEBUILDER_ASSETS).
	KubebuilderAssets string
	// Crossplane is Crossplane core v2.4.2 ($CROSSPLANE_BIN).
	Crossplane string
	// CrossplaneCRDs is the directory of core's CRDs ($CROSSPLANE_CRDS).
	CrossplaneCRDs string
	// CrossplaneWebhookConfigs is the directory of core's webhook
	// configurations ($CROSSPLANE_WEBHOOK_CONFIGS), which `core init`
	// applies.
	CrossplaneWebhookConfigs string
	// Crank is the Crossplane CLI with xpkg build ($CRANK_BIN). Only
	// BuildPackage needs it.
	Crank string
	// KubeControllerManager optionally names a kube-controller-manager binary
	// ($KUBE_CONTROLLER_MANAGER_BIN). When set the harness runs its garbage
	// collector and namespace controllers. Without it nothing is garbage
	// collected through ownerReferences - and Crossplane relies on that to
	// delete an XR's composed resources - and deleted namespaces never go.
	KubeControllerManager string
	// CrossplaneChart optionally names Crossplane's Helm chart directory
	// ($CROSSPLANE_CHART, cluster/charts/crossplane of the same module).
	// With it and KubeControllerManager (whose clusterrole-aggregation
	// controller fills the chart's aggregated ClusterRoles), core and the
	// RBAC manager run as the chart's ServiceAccounts with the chart's
	// permissions; without, with the admin kubeconfig.
	CrossplaneChart string
}

// toolVars maps each required Tools field to its environment variable.
var toolVars = []struct {
	env  string
	dir  bool
	dest func(*Tools) *string
}{
	{"KUBEBUILDER_ASSETS", true, func(t *Tools) *string { return &t.KubebuilderAssets }},
	{"CROSSPLANE_BIN", false, func(t *Tools) *string { return &t.Crossplane }},
	{"CROSSPLANE_CRDS", true, func(t *Tools) *string { return &t.CrossplaneCRDs }},
	{"CROSSPLANE_WEBHOOK_CONFIGS", true, func(t *Tools) *string { return &t.CrossplaneWebhookConfigs }},
	{"CRANK_BIN", false, func(t *Tools) *string { return &t.Crank }},
}

// ToolsFromEnv reads Tools from the environment variables that
// `bash hack/tools.sh env` prints. It returns an error wrapping
// ErrToolsMissing that names every variable that is unset or points at
// nothing.
func ToolsFromEnv() (Tools, error) {
	t := Tools{KubeControllerManager: os.Getenv("KUBE_CONTROLLER_MANAGER_BIN"), CrossplaneChart: os.Getenv("CROSSPLANE_CHART")}
	var missing []string
	for _, v := range toolVars {
		p := os.Getenv(v.env)
		*v.dest(&t) = p
		if p == "" {
			missing = append(missing, v.env+" is unset")
			continue
		}
		if err := checkPath(p, v.dir); err != nil {
			missing = append(missing, fmt.Sprintf("%s=%s: %v", v.env, p, err))
		}
	}
	if t.KubeControllerManager != "" {
		if err := checkPath(t.KubeControllerManager, false); err != nil {
			missing = append(missing, fmt.Sprintf("KUBE_CONTROLLER_MANAGER_BIN=%s: %v", t.KubeControllerManager, err))
		}
	}
	if len(missing) > 0 {
		return t, errors.Wrap(ErrToolsMissing, strings.Join(missing, "; "))
	}
	return t, nil
}

// validate reports the first missing tool Start needs.
func (t Tools) validate() error {
	var missing []string
	if t.KubebuilderAssets == "" {
		missing = append(missing, "KubebuilderAssets")
	} else {
		for _, b := range []string{"etcd", "kube-apiserver"} {
			if err := checkPath(filepath.Join(t.KubebuilderAssets, b), false); err != nil {
				missing = append(missing, fmt.Sprintf("%s in %s: %v", b, t.KubebuilderAssets, err))
			}
		}
	}
	if t.Crossplane == "" {
		missing = append(missing, "Crossplane")
	}
	if t.CrossplaneCRDs == "" {
		missing = append(missing, "CrossplaneCRDs")
	}
	if t.CrossplaneWebhookConfigs == "" {
		missing = append(missing, "CrossplaneWebhookConfigs")
	}
	if len(missing) > 0 {
		return errors.Wrap(ErrToolsMissing, strings.Join(missing, "; "))
	}
	return nil
}

func checkPath(p string, dir bool) error {
	fi, err := os.Stat(p)
	if err != nil {
		return errors.New("does not exist")
	}
	if dir != fi.IsDir() {
		if dir {
			return errors.New("is not a directory")
		}
		return errors.New("is a directory")
	}
	return nil
}
