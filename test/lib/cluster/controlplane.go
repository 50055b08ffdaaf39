//go:build linux

package cluster

import (
	"context"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/wait"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
)

// What test/lib/platform needs of a control plane; the cluster has it once
// InstallCrossplane has run.

// Namespace is Crossplane's namespace.
func (c *Cluster) Namespace() string { return CrossplaneNamespace }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// RegistryHost is the registry's host:port, on the node's address.
func (c *Cluster) RegistryHost() string { return c.Registry.Host }

// PushImage pushes img to the registry as ref ("repo:tag") and returns
// its full reference.
func (c *Cluster) PushImage(ctx context.Context, img v1.Image, ref string) (string, error) {
	return c.Push(ctx, img, ref)
}

// PushPackage pushes the package file xpkgPath to the registry as ref
// ("repo:tag", or the registry's host/repo:tag) and returns its full
// reference.
func (c *Cluster) PushPackage(ctx context.Context, xpkgPath, ref string) (string, error) {
	ref = strings.TrimPrefix(ref, c.Registry.Host+"/")
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
	if err := c.ApplyConfiguration(ctx, name, ref); err != nil {
		return err
	}
	return c.WaitConfiguration(ctx, name, ref)
}

// ApplyConfiguration creates the Configuration name for ref, or points the
// existing one at ref.
func (c *Cluster) ApplyConfiguration(ctx context.Context, name, ref string) error {
	cfg := &pkgv1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cfg.Spec.Package = ref
	err := c.Kube.Client.Create(ctx, cfg)
	if kerrors.IsAlreadyExists(err) {
		err = c.Kube.Client.Patch(ctx, cfg, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"package":`+strconv.Quote(ref)+`}}`)))
	}
	return errors.Wrapf(err, "cannot apply Configuration %s", name)
}

// WaitConfiguration waits until the Configuration name is Installed and
// Healthy at ref.
func (c *Cluster) WaitConfiguration(ctx context.Context, name, ref string) error {
	last := ""
	err := wait.Until(ctx, 250*time.Millisecond, func(ctx context.Context) bool {
		cfg := &pkgv1.Configuration{}
		if err := c.Kube.Client.Get(ctx, types.NamespacedName{Name: name}, cfg); err != nil {
			last = err.Error()
			return false
		}
		inst, hl := cfg.GetCondition(pkgv1.TypeInstalled), cfg.GetCondition(pkgv1.TypeHealthy)
		last = "Installed=" + string(inst.Status) + " Healthy=" + string(hl.Status)
		if hl.Message != "" {
			last += ": " + hl.Message
		}
		if cfg.Status.ResolvedPackage != "" && cfg.Status.ResolvedPackage != ref {
			last += " (resolved " + cfg.Status.ResolvedPackage + ")"
			return false
		}
		return inst.Status == corev1.ConditionTrue && hl.Status == corev1.ConditionTrue
	})
	return errors.Wrapf(err, "Configuration %s not Installed and Healthy at %s (%s; the Lock: %s)", name, ref, last, c.lockStatus(ctx))
}

// lockStatus is the package Lock's Resolved condition.
func (c *Cluster) lockStatus(ctx context.Context) string {
	l := &pkgv1beta1.Lock{}
	if err := c.Kube.Client.Get(ctx, types.NamespacedName{Name: "lock"}, l); err != nil {
		return err.Error()
	}
	cd := l.GetCondition(pkgv1beta1.TypeResolved)
	return "Resolved=" + string(cd.Status) + " " + cd.Message
}

// A pkgKind is a kind of package with a runtime.
type pkgKind struct {
	kind    string
	newPkg  func() pkgv1.PackageWithRuntime
	runtime func(c *Cluster, name string) *Runtime
}

// named is a package of the kind named name.
func (k pkgKind) named(name string) pkgv1.PackageWithRuntime {
	p := k.newPkg()
	p.SetName(name)
	return p
}

var (
	kindProvider = pkgKind{
		kind:    "Provider",
		newPkg:  func() pkgv1.PackageWithRuntime { return &pkgv1.Provider{} },
		runtime: (*Cluster).Provider,
	}
	kindFunction = pkgKind{
		kind:    "Function",
		newPkg:  func() pkgv1.PackageWithRuntime { return &pkgv1.Function{} },
		runtime: (*Cluster).Function,
	}
)

// DependencyProvider waits for the package manager to install the Provider
// name as a dependency, points it at the DeploymentRuntimeConfig config
// (when set) and waits until its current revision's pods run.
func (c *Cluster) DependencyProvider(ctx context.Context, name, config string) (*Runtime, error) {
	return c.dependency(ctx, kindProvider, name, config)
}

// DependencyFunction is DependencyProvider for a Function.
func (c *Cluster) DependencyFunction(ctx context.Context, name, config string) (*Runtime, error) {
	return c.dependency(ctx, kindFunction, name, config)
}

// UpgradeProvider points the Provider name at the package ref (and the
// DeploymentRuntimeConfig config, when set) and waits until only the new
// revision's pods run.
func (c *Cluster) UpgradeProvider(ctx context.Context, name, ref, config string) (*Runtime, error) {
	return c.upgrade(ctx, kindProvider, name, ref, config)
}

// UpgradeFunction is UpgradeProvider for a Function.
func (c *Cluster) UpgradeFunction(ctx context.Context, name, ref, config string) (*Runtime, error) {
	return c.upgrade(ctx, kindFunction, name, ref, config)
}

// InstallFunction creates the Function name from ref (with the
// DeploymentRuntimeConfig config, when set) and waits until it runs.
func (c *Cluster) InstallFunction(ctx context.Context, name, ref, config string) (*Runtime, error) {
	return c.upgrade(ctx, kindFunction, name, ref, config)
}

func (c *Cluster) dependency(ctx context.Context, k pkgKind, name, config string) (*Runtime, error) {
	pkg := k.newPkg()
	if err := wait.Until(ctx, 250*time.Millisecond, func(ctx context.Context) bool {
		return c.Kube.Client.Get(ctx, types.NamespacedName{Name: name}, pkg) == nil
	}); err != nil {
		return nil, errors.Wrapf(err, "cannot wait for Crossplane to install %s %s as a dependency (the Lock: %s)", k.kind, name, c.lockStatus(ctx))
	}
	if config != "" {
		done := c.ExpectRollout()
		defer done()
		patch := []byte(`{"spec":{"runtimeConfigRef":{"name":` + strconv.Quote(config) + `}}}`)
		if err := c.Kube.Client.Patch(ctx, pkg, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return nil, errors.Wrapf(err, "cannot point %s %s at DeploymentRuntimeConfig %s", k.kind, name, config)
		}
	}
	return c.settle(ctx, k, name, "", config)
}

func (c *Cluster) upgrade(ctx context.Context, k pkgKind, name, ref, config string) (*Runtime, error) {
	done := c.ExpectRollout()
	defer done()
	pkg := k.newPkg()
	pkg.SetName(name)
	pkg.SetSource(ref)
	if config != "" {
		pkg.SetRuntimeConfigRef(&pkgv1.RuntimeConfigReference{Name: config})
	}
	err := c.Kube.Client.Create(ctx, pkg)
	if kerrors.IsAlreadyExists(err) {
		patch := `{"spec":{"package":` + strconv.Quote(ref)
		if config != "" {
			patch += `,"runtimeConfigRef":{"name":` + strconv.Quote(config) + `}`
		}
		err = c.Kube.Client.Patch(ctx, pkg, client.RawPatch(types.MergePatchType, []byte(patch+`}}`)))
	}
	if err != nil {
		return nil, errors.Wrapf(err, "cannot apply %s %s", k.kind, name)
	}
	return c.settle(ctx, k, name, ref, config)
}

// settle waits until the package name is Healthy with a current revision
// (of the image ref and DeploymentRuntimeConfig config, when set) whose
// Deployment's pods are all ready and the only ones of the package.
func (c *Cluster) settle(ctx context.Context, k pkgKind, name, ref, config string) (*Runtime, error) {
	r := k.runtime(c, name)
	last := ""
	err := wait.Until(ctx, 250*time.Millisecond, func(ctx context.Context) bool {
		var running bool
		running, last = kube.PackageRunning(ctx, c.Kube.Client, CrossplaneNamespace, k.named(name), ref, config)
		return running
	})
	if err != nil {
		return nil, errors.Wrapf(err, "%s %s not running: %s", k.kind, name, last)
	}
	return r, nil
}
