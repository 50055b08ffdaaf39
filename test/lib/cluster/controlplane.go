//go:build linux

package cluster

import (
	"context"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
)

// What test/lib/platform needs of a control plane; the cluster has it once
// InstallCrossplane has run.

// Namespace is Crossplane's namespace.
func (c *Cluster) Namespace() string { return CrossplaneNamespace }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// RegistryHost is the registry's host:port, on the node's address.
func (c *Cluster) RegistryHost() string { return c.Registry.Host }

// PushPackage pushes the package file xpkgPath to the registry as ref
// ("repo:tag") and returns its full reference.
func (c *Cluster) PushPackage(ctx context.Context, xpkgPath, ref string) (string, error) {
	if first, _, ok := strings.Cut(ref, "/"); ok && strings.ContainsAny(first, ".:") {
		return "", errors.Errorf("cannot push to %q: give repo:tag, pushed to the cluster's registry", ref)
	}
	img, err := tarball.ImageFromPath(xpkgPath, nil)
	if err != nil {
		return "", errors.Wrapf(err, "cannot read package %s", xpkgPath)
	}
	return c.Push(ctx, img, ref)
}

// CreateRegistryPullSecret creates (or updates) the pull Secret name for
// the registry in Crossplane's namespace.
func (c *Cluster) CreateRegistryPullSecret(ctx context.Context, name string) error {
	return c.CreatePullSecret(ctx, CrossplaneNamespace, name)
}

// InstallConfiguration creates the Configuration name for ref and waits
// until it is Installed and Healthy.
func (c *Cluster) InstallConfiguration(ctx context.Context, name, ref string) error {
	cfg := &pkgv1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cfg.Spec.Package = ref
	if err := c.Kube.Client.Create(ctx, cfg); err != nil {
		return errors.Wrapf(err, "cannot create Configuration %s", name)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	last := ""
	for {
		if err := c.Kube.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			last = err.Error()
		} else {
			inst, hl := cfg.GetCondition(pkgv1.TypeInstalled), cfg.GetCondition(pkgv1.TypeHealthy)
			if inst.Status == corev1.ConditionTrue && hl.Status == corev1.ConditionTrue {
				return nil
			}
			last = "Installed=" + string(inst.Status) + " " + inst.Message + "; Healthy=" + string(hl.Status) + " " + hl.Message
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("Configuration %s not Installed and Healthy: %s", name, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
