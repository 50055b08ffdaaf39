// Package platform installs the XWidget API into a control plane with
// Crossplane (a real one-node cluster, test/lib/cluster) the way a platform
// team would: it publishes provider-widget, function-widget and
// configuration-widget to the cluster's private registry as `make publish`
// does, gives Crossplane the registry's credentials (a pull Secret and an
// ImageConfig), installs only the Configuration through Crossplane's
// package manager (which resolves and installs the provider and the
// function), gives those their DeploymentRuntimeConfigs, activates the
// provider's managed resources and configures the provider for a Widget
// API. The end-to-end suite, the benchmarks and `make demo` share it, so the
// demo shows exactly what the suite tests.
package platform

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/widgetco/crossplane-widget/package/xpkg"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// Org is the registry path, under the loopback registry's host, that the
// platform publishes its packages to.
const Org = "widgetco"

// Names of the installed packages. Crossplane names a dependency after its
// repository (crossplane-runtime's xpkg.ToDNSLabel of widgetco/provider-widget),
// and the Configuration's Compositions call the function by that name.
const (
	ConfigurationName = "configuration-widget"
	ProviderName      = Org + "-provider-widget"
	FunctionName      = Org + "-function-widget"
)

// Names of the DeploymentRuntimeConfigs of examples/runtime.
const (
	ProviderRuntimeConfig = "provider-widget"
	FunctionRuntimeConfig = "function-widget"
)

// LeaseName is provider-widget's leader election lease in Crossplane's
// namespace.
const LeaseName = "crossplane-leader-election-provider-widget"

// MetricsPort is where both packages serve Prometheus metrics in their pods.
const MetricsPort = 8080

// ActivationPolicy is the ManagedResourceActivationPolicy Install creates.
// The provider declares the safe-start capability, so Crossplane serves its
// managed resource kinds only once a policy activates them; this one does,
// whatever default policy the control plane has.
const ActivationPolicy = "provider-widget"

// RegistryCredentials names the pull Secret (in Crossplane's namespace) and
// the ImageConfig that give Crossplane the credentials for Registry: the
// registry is private, and a Configuration's packagePullSecrets would not
// reach its dependencies, so an ImageConfig matching the registry's prefix
// gives them to every package from it (docs/install.md#install-from-a-private-registry).
const RegistryCredentials = "widgetco-registry" //nolint:gosec // The name of a Secret and an ImageConfig, not a credential.

// ManagedCRDs are the provider's managed resource kinds that Install waits to
// be served.
var ManagedCRDs = []string{
	"widgets.widget.m.widgetco.io",
	"widgetkeys.widget.m.widgetco.io",
	"widgetinventories.widget.m.widgetco.io",
	"widgets.widget.widgetco.io",
	"widgetkeys.widget.widgetco.io",
}

// CompositeCRDs are the kinds the XRDs in examples/composition define.
var CompositeCRDs = []string{
	"xwidgets.platform.widgetco.io",
	"xwidgets.legacy.platform.widgetco.io",
	"widgetclaims.legacy.platform.widgetco.io",
}

// Options configure Install.
type Options struct {
	// Root is the repository root, for examples/ and package/.
	Root string
	// Packages are the package files to install.
	Packages Packages
	// Crank is the Crossplane CLI, which builds the Configuration.
	Crank string
	// Token is the Widget API token the ProviderConfigs use: one of the
	// Widget API's tokens.
	Token string
	// ProviderArgs and FunctionArgs are extra flags for the packages'
	// containers, added to the args of the DeploymentRuntimeConfigs in
	// examples/runtime.
	ProviderArgs []string
	FunctionArgs []string
	// ChangeLogs runs the provider with change logs on: the
	// DeploymentRuntimeConfig of examples/runtime/changelogs.yaml, with the
	// stand-in sidecar (see PublishChangeLogsSidecar).
	ChangeLogs bool
	// ChangeLogsSidecar, when set, returns the stand-in sidecar's image,
	// built while the control plane started
	// (StartChangeLogsSidecarBuild). Default: Install builds it.
	ChangeLogsSidecar func() (v1.Image, error)
	// Signer, when set, signs the packages as make publish does.
	Signer *Signer
	// Log receives progress. Default: discard.
	Log *slog.Logger
}

// A ControlPlane is what the platform is installed into: a real cluster
// (test/lib/cluster).
type ControlPlane interface {
	// Client is an admin client.
	Client() client.Client
	// Namespace is Crossplane's namespace.
	Namespace() string
	// Dir is a directory packages may be built into.
	Dir() string
	// RegistryHost is the private registry's host:port.
	RegistryHost() string
	// PushPackage pushes a package file to the registry as "repo:tag" and
	// returns its full reference.
	PushPackage(ctx context.Context, xpkgPath, ref string) (string, error)
	// PushImage pushes an image to the registry as "repo:tag" and returns
	// its full reference.
	PushImage(ctx context.Context, img v1.Image, ref string) (string, error)
	// CreateRegistryPullSecret creates (or updates) the pull Secret name
	// for the registry in Namespace.
	CreateRegistryPullSecret(ctx context.Context, name string) error
	// InstallConfiguration installs the Configuration name from ref and
	// waits until it is Installed and Healthy.
	InstallConfiguration(ctx context.Context, name, ref string) error
}

// rollouts is a control plane that tells expected refusals from others
// (audit.Log).
type rollouts interface {
	// ExpectRollout marks the time until done as a package rollout.
	ExpectRollout() (done func())
}

// Install publishes the three packages to cp's registry at
// o.Packages.Version, installs the Configuration, points its dependencies
// at the DeploymentRuntimeConfigs of examples/runtime and waits until their
// revisions' Deployments are available, configures the provider for the
// Widget API at endpoint (which the provider's pods must reach) and waits
// for the XWidget API to be served. It returns once claims and XRs can be
// created.
func Install(ctx context.Context, cp ControlPlane, endpoint string, o Options) error {
	return install(ctx, cp, endpoint, o, func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			return runWith(gctx, cp, &pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: ProviderName}}, ProviderRuntimeConfig)
		})
		g.Go(func() error {
			return runWith(gctx, cp, &pkgv1.Function{ObjectMeta: metav1.ObjectMeta{Name: FunctionName}}, FunctionRuntimeConfig)
		})
		return g.Wait()
	})
}

// runWith waits for the package manager to create the dependency pkg,
// points it at the DeploymentRuntimeConfig config (a dependency is created
// with Crossplane's default), and waits until it is Healthy with a current
// revision of that config whose Deployment (named after the revision) is
// available.
func runWith(ctx context.Context, cp ControlPlane, pkg pkgv1.PackageWithRuntime, config string) error {
	c := cp.Client()
	if err := wait.Until(ctx, 250*time.Millisecond, func(ctx context.Context) bool {
		return c.Get(ctx, client.ObjectKeyFromObject(pkg), pkg) == nil
	}); err != nil {
		return errors.Wrapf(err, "cannot wait for Crossplane to install %s as a dependency", pkg.GetName())
	}
	patch := []byte(`{"spec":{"runtimeConfigRef":{"name":"` + config + `"}}}`)
	if err := c.Patch(ctx, pkg, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return errors.Wrapf(err, "cannot point %s at DeploymentRuntimeConfig %s", pkg.GetName(), config)
	}
	last := ""
	err := wait.Until(ctx, 500*time.Millisecond, func(ctx context.Context) bool {
		var running bool
		running, last = kube.PackageRunning(ctx, c, cp.Namespace(), pkg, "", config)
		return running
	})
	return errors.Wrapf(err, "%s not running with DeploymentRuntimeConfig %s: %s", pkg.GetName(), config, last)
}

// install is Install's path; dependencies waits until the provider and the
// function run.
func install(ctx context.Context, cp ControlPlane, endpoint string, o Options, dependencies func(context.Context) error) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	begin := time.Now()
	c := cp.Client()
	// Before the provider: its managed resource definitions are activated
	// as soon as the package manager creates them.
	if err := activate(ctx, c); err != nil {
		return err
	}
	standIn := ""
	if o.ChangeLogs {
		var err error
		if standIn, err = PublishChangeLogsSidecar(ctx, cp, o.Root, o.ChangeLogsSidecar); err != nil {
			return err
		}
		o.Log.Info("Change logs stand-in published", "image", standIn, "duration", since(begin))
	}
	if err := runtimeConfigs(ctx, c, o, standIn); err != nil {
		return err
	}
	if err := registryCredentials(ctx, cp); err != nil {
		return err
	}
	ref, err := Release(ctx, cp, o.Root, o.Crank, o.Packages, o.Packages.Version, o.Signer)
	if err != nil {
		return err
	}
	o.Log.Info("Packages published", "configuration", ref, "duration", since(begin))
	// The dependencies start with Crossplane's default runtime config and
	// are then pointed at theirs: two revisions, each with a ServiceAccount
	// of its own, which RBAC knows only once the RBAC manager has bound it.
	if r, ok := cp.(rollouts); ok {
		done := r.ExpectRollout()
		defer done()
	}
	if err := cp.InstallConfiguration(ctx, ConfigurationName, ref); err != nil {
		return err
	}
	o.Log.Info("Configuration installed", "package", ref, "duration", since(begin))
	if err := dependencies(ctx); err != nil {
		return err
	}
	o.Log.Info("Dependencies running", "provider", ProviderName, "function", FunctionName, "duration", since(begin))
	if err := waitCRDs(ctx, c, ManagedCRDs...); err != nil {
		return errors.Wrap(err, "cannot wait for the provider's managed resources to be served (are their ManagedResourceDefinitions active?)")
	}
	if err := configure(ctx, cp, o.Root, o.Token, endpoint); err != nil {
		return err
	}
	if err := waitCRDs(ctx, c, CompositeCRDs...); err != nil {
		return errors.Wrap(err, "cannot wait for the XWidget API to be served")
	}
	o.Log.Info("XWidget API published", "duration", since(begin))
	return nil
}

// CoreArgs are the flags docs/install.md recommends for Crossplane core
// v2.4.2: ten concurrent reconciles per controller, not 100. With 100, an
// XR whose own write queued it again is reconciled before that write reaches
// core's cache, and many XRs converging at once keep losing Ready
// (docs/convergence.md#why).
func CoreArgs() []string { return []string{"--max-concurrent-reconciles=10"} }

// Registry is where cp's packages are published: <loopback registry>/widgetco.
func Registry(cp ControlPlane) string { return cp.RegistryHost() + "/" + Org }

// A Signer signs what Release publishes, as make publish does (with
// COSIGN_KEY): each package with its SBOM and provenance.
type Signer struct {
	xpkg.Signer
	// Commit is the source the provenance names: the checked-out commit.
	Commit xpkg.Commit
}

// Release publishes the packages to h's registry as `make publish` does:
// the provider and the function tagged version, then configuration-widget of
// that version (ReleaseConfiguration), each signed by s unless it is nil. It
// returns the Configuration's reference. version must be a semantic version.
func Release(ctx context.Context, h ControlPlane, root, crank string, pkgs Packages, version string, s *Signer) (string, error) {
	for _, p := range []struct{ name, file string }{{"provider-widget", pkgs.Provider}, {"function-widget", pkgs.Function}} {
		ref, err := h.PushPackage(ctx, p.file, Org+"/"+p.name+":"+version)
		if err != nil {
			return "", err
		}
		if err := s.sign(ctx, h, root, version, p.name, []string{runtime.GOARCH}, ref); err != nil {
			return "", err
		}
	}
	ref, err := ReleaseConfiguration(ctx, h, root, crank, version)
	if err != nil {
		return "", err
	}
	return ref, s.sign(ctx, h, root, version, xpkg.Configuration.Name, nil, ref)
}

// sign signs the package pkg of version, published as ref, with the
// binaries make xpkg built for archs (the ones in its image); a nil Signer
// signs nothing.
func (s *Signer) sign(ctx context.Context, h ControlPlane, root, version, pkg string, archs []string, ref string) error {
	if s == nil {
		return nil
	}
	b := &xpkg.Builder{RepoRoot: root, OutputDir: filepath.Join(root, "_output"), Version: version, Revision: s.Commit.Revision, Created: s.Commit.Time}
	_, err := b.Sign(ctx, s.Signer, pkg, archs, Registry(h), ref)
	return err
}

// ReleaseConfiguration builds configuration-widget of version (into h's
// directory) with its dependencies in h's registry, pushes it there and
// returns its reference. It does not push the dependencies.
func ReleaseConfiguration(ctx context.Context, h ControlPlane, root, crank, version string) (string, error) {
	if crank == "" {
		return "", errors.New("cannot build the Configuration: no Crossplane CLI (CRANK_BIN; bash hack/tools.sh env sets it)")
	}
	b := &xpkg.Builder{
		RepoRoot:  root,
		OutputDir: filepath.Join(h.Dir(), "packages"),
		Version:   version,
		Revision:  "local",
		Crank:     crank,
	}
	a, err := b.BuildConfiguration(ctx, xpkg.Configuration, Registry(h))
	if err != nil {
		return "", err
	}
	return h.PushPackage(ctx, a.Xpkg, Org+"/"+xpkg.Configuration.Name+":"+version)
}

// DependencyRef is the reference of package ("provider-widget" or
// "function-widget") at version in h's registry.
func DependencyRef(h ControlPlane, pkg, version string) string {
	return Registry(h) + "/" + pkg + ":" + version
}

// registryCredentials creates the pull Secret for h's registry and the
// ImageConfig that hands it to Crossplane for every package under Registry.
func registryCredentials(ctx context.Context, h ControlPlane) error {
	if err := h.CreateRegistryPullSecret(ctx, RegistryCredentials); err != nil {
		return err
	}
	ic := &pkgv1beta1.ImageConfig{
		ObjectMeta: metav1.ObjectMeta{Name: RegistryCredentials},
		Spec: pkgv1beta1.ImageConfigSpec{
			MatchImages: []pkgv1beta1.ImageMatch{{Type: pkgv1beta1.Prefix, Prefix: Registry(h) + "/"}},
			Registry: &pkgv1beta1.RegistryConfig{Authentication: &pkgv1beta1.RegistryAuthentication{
				PullSecretRef: corev1.LocalObjectReference{Name: RegistryCredentials},
			}},
		},
	}
	if err := h.Client().Create(ctx, ic); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create ImageConfig %s", RegistryCredentials)
	}
	return nil
}

// activate creates the ManagedResourceActivationPolicy for the provider's
// kinds in both scopes.
func activate(ctx context.Context, c client.Client) error {
	p := &xpextv1alpha1.ManagedResourceActivationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ActivationPolicy},
		Spec: xpextv1alpha1.ManagedResourceActivationPolicySpec{
			Activations: []xpextv1alpha1.ActivationPolicy{"*.widget.m.widgetco.io", "*.widget.widgetco.io"},
		},
	}
	if err := c.Create(ctx, p); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create the ManagedResourceActivationPolicy for provider-widget")
	}
	return nil
}

// runtimeConfigs creates the DeploymentRuntimeConfigs of
// examples/runtime/deploymentruntimeconfigs.yaml, with o's extra args, and
// with o.ChangeLogs provider-widget's of changelogs.yaml, whose sidecar runs
// the image standIn.
func runtimeConfigs(ctx context.Context, c client.Client, o Options, standIn string) error {
	objs, err := ReadObjects(filepath.Join(o.Root, "examples", "runtime", "deploymentruntimeconfigs.yaml"))
	if err != nil {
		return err
	}
	if o.ChangeLogs {
		if objs, err = withChangeLogs(o.Root, objs, standIn); err != nil {
			return err
		}
	}
	extra := map[string][]string{ProviderRuntimeConfig: o.ProviderArgs, FunctionRuntimeConfig: o.FunctionArgs}
	for _, u := range objs {
		if len(extra[u.GetName()]) == 0 {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
		if len(cs) == 0 {
			return errors.Errorf("DeploymentRuntimeConfig %s has no container to add args to", u.GetName())
		}
		ctr, _ := cs[0].(map[string]any)
		args, _, _ := unstructured.NestedStringSlice(ctr, "args")
		_ = unstructured.SetNestedStringSlice(ctr, append(args, extra[u.GetName()]...), "args")
		cs[0] = ctr
		if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "deploymentTemplate", "spec", "template", "spec", "containers"); err != nil {
			return errors.Wrapf(err, "cannot add args to DeploymentRuntimeConfig %s", u.GetName())
		}
	}
	return Create(ctx, c, objs...)
}

// configure creates the token Secret, the ClusterProviderConfig the
// namespaced XWidget's Composition references and the cluster-scoped
// ProviderConfig the legacy one references, from
// examples/provider/clusterproviderconfig.yaml, pointed at the Widget API at
// endpoint.
func configure(ctx context.Context, h ControlPlane, root, token, endpoint string) error {
	objs, err := ReadObjects(filepath.Join(root, "examples", "provider", "clusterproviderconfig.yaml"))
	if err != nil {
		return err
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Secret":
			u.SetNamespace(h.Namespace())
			if err := unstructured.SetNestedField(u.Object, token, "stringData", "token"); err != nil {
				return errors.Wrap(err, "cannot set the Widget API token")
			}
		default:
			if err := unstructured.SetNestedField(u.Object, endpoint, "spec", "endpoint"); err != nil {
				return errors.Wrap(err, "cannot set the Widget API endpoint")
			}
			if ns, ok, _ := unstructured.NestedString(u.Object, "spec", "credentials", "secretRef", "namespace"); ok && ns != "" {
				_ = unstructured.SetNestedField(u.Object, h.Namespace(), "spec", "credentials", "secretRef", "namespace")
			}
		}
	}
	return Create(ctx, h.Client(), objs...)
}

// waitCRDs waits for the named CRDs to be established.
func waitCRDs(ctx context.Context, c client.Client, names ...string) error {
	pending := ""
	err := wait.Until(ctx, 250*time.Millisecond, func(ctx context.Context) bool {
		var missing []string
		for _, n := range names {
			crd := &extv1.CustomResourceDefinition{}
			if err := c.Get(ctx, types.NamespacedName{Name: n}, crd); err != nil || !established(crd) {
				missing = append(missing, n)
			}
		}
		pending = strings.Join(missing, ", ")
		return len(missing) == 0
	})
	return errors.Wrapf(err, "CRDs not established: %s", pending)
}

func established(crd *extv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == extv1.Established {
			return c.Status == extv1.ConditionTrue
		}
	}
	return false
}

// Create creates objs in order, ignoring those that already exist.
func Create(ctx context.Context, c client.Client, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Create(ctx, u); err != nil && !kerrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create %s %s", u.GetKind(), Name(u))
		}
	}
	return nil
}

// EnsureNamespace creates namespace ns unless it exists.
func EnsureNamespace(ctx context.Context, c client.Client, ns string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create namespace %s", ns)
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
