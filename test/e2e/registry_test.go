//go:build linux

package e2e_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// upstream is where TestRegistryMirror's packages are published as far as
// Crossplane knows: a host under .example, which never resolves (RFC 2606),
// so that nothing here can reach a real registry even when a rewrite fails.
const upstream = "xpkg.widgetco.example/widgetco"

// pkgObject is a package with a status: Configuration, Provider, Function.
type pkgObject interface {
	client.Object
	GetCondition(xpv2.ConditionType) xpv2.Condition
	GetAppliedImageConfigRefs() []pkgv1.ImageConfigRef
	GetResolvedSource() string
}

// TestPrivateRegistry checks how the suite's set-up installed
// configuration-widget: from a registry that refuses anonymous pulls, with
// the credentials of one pull Secret that an ImageConfig hands to Crossplane
// for every package under the registry's prefix - the Configuration and the
// provider and function it depends on, whose pods the node pulled with the
// pull Secret Crossplane put on their Deployments.
func TestPrivateRegistry(t *testing.T) {
	if suite.skip == "" && suite.c.Registry.Auth.Password == "" {
		t.Skipf("needs a registry that asks for credentials; %s names none", registryPasswordEnv)
	}
	s := newScenario(t, true)
	c := suite.c.Client()

	cfg := &pkgv1.Configuration{}
	if err := c.Get(s.ctx, types.NamespacedName{Name: platform.ConfigurationName}, cfg); err != nil {
		t.Fatal(err)
	}
	// The registry is private: what Crossplane pulled, an anonymous client
	// cannot.
	ref, err := name.ParseReference(cfg.Spec.Package, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Head(ref, remote.WithContext(s.ctx))
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != 401 {
		t.Errorf("anonymous HEAD %s: %v, want 401 Unauthorized", ref, err)
	}

	want := pkgv1.ImageConfigRef{Name: platform.RegistryCredentials, Reason: pkgv1.ImageConfigReasonSetPullSecret}
	for _, p := range []pkgObject{cfg, &pkgv1.Provider{}, &pkgv1.Function{}} {
		n := map[string]string{"Configuration": platform.ConfigurationName, "Provider": platform.ProviderName, "Function": platform.FunctionName}
		kind := kindOf(p)
		if err := c.Get(s.ctx, types.NamespacedName{Name: n[kind]}, p); err != nil {
			t.Fatal(err)
		}
		if got := p.GetCondition(pkgv1.TypeHealthy); got.Status != corev1.ConditionTrue {
			t.Errorf("%s %s Healthy=%s (%s), want True", kind, p.GetName(), got.Status, got.Message)
		}
		if !slices.Contains(p.GetAppliedImageConfigRefs(), want) {
			t.Errorf("%s %s applied ImageConfigs %+v, want %+v among them", kind, p.GetName(), p.GetAppliedImageConfigRefs(), want)
		}
		if !strings.HasPrefix(p.GetResolvedSource(), platform.Registry(suite.c)+"/") {
			t.Errorf("%s %s resolved to %q, want a package under %s", kind, p.GetName(), p.GetResolvedSource(), platform.Registry(suite.c))
		}
	}
	// The pods: Crossplane put the ImageConfig's pull Secret on the
	// Deployments, which is what the node pulls with.
	for kind, n := range map[string]string{"provider": platform.ProviderName, "function": platform.FunctionName} {
		ds, err := packageDeployments(s, kind, n)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, d := range ds {
			if !slices.Contains(d.Spec.Template.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: platform.RegistryCredentials}) {
				t.Errorf("Deployment %s has imagePullSecrets %+v, want %s among them", d.Name, d.Spec.Template.Spec.ImagePullSecrets, platform.RegistryCredentials)
			}
		}
	}
}

// kindOf is p's kind: "Configuration", "Provider" or "Function".
func kindOf(p client.Object) string {
	switch p.(type) {
	case *pkgv1.Configuration:
		return "Configuration"
	case *pkgv1.Provider:
		return "Provider"
	case *pkgv1.Function:
		return "Function"
	}
	return ""
}

// packageDeployments returns the Deployments (one per revision that runs)
// of the provider or function pkg ("provider" or "function" is kind) in
// Crossplane's namespace, at least one.
func packageDeployments(s *scenario, kind, pkg string) ([]appsv1.Deployment, error) {
	l := &appsv1.DeploymentList{}
	if err := suite.c.Client().List(s.ctx, l, client.InNamespace(suite.c.Namespace())); err != nil {
		return nil, err
	}
	var out []appsv1.Deployment
	for _, d := range l.Items {
		if d.Spec.Template.Labels["pkg.crossplane.io/"+kind] == pkg {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, errors.Errorf("no Deployment of %s %s", kind, pkg)
	}
	return out, nil
}

// TestRegistryMirror installs a Configuration and the Function it depends
// on, both published under upstream, from a mirror of them in the private
// cluster's registry: one ImageConfig rewrites upstream to the mirror's
// prefix, another gives the mirror's credentials. First without any
// credentials: the install fails, and the Configuration says why. Then with
// the credentials in the Configuration's packagePullSecrets: the
// Configuration installs and its dependency does not, and the Lock says
// why. Then with the ImageConfig: everything installs.
//
// The packages are small ones of this scenario's own (the function runs
// function-widget's runtime image under another name, with no CRDs), because a
// second configuration-widget would contend with the suite's for its XRDs
// and CRDs.
func TestRegistryMirror(t *testing.T) {
	s := newScenario(t, true)
	c := suite.c.Client()
	const (
		version = "v0.1.0"
		cfgName = "configuration-mirrored"
		fnName  = "function-mirrored"
		// The dependency's name: its repository path as a DNS label.
		fnPkgName = "widgetco-function-mirrored"
	)
	mirror := suite.c.RegistryHost() + "/mirror/widgetco"

	// Build and mirror the packages, as a platform team's `crane copy`
	// from upstream would leave them. The function embeds function-widget's
	// runtime image of this build.
	image := filepath.Join(suite.root, "_output", "image", "function-widget-"+suite.pkgs.Version+"-"+runtime.GOARCH+".tar")
	dir := t.TempDir()
	fnXpkg := buildPackage(t, s, dir, fnName, image, `apiVersion: meta.pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: `+fnName+`
spec:
  crossplane:
    version: ">=v2.0.0"
`)
	cfgXpkg := buildPackage(t, s, dir, cfgName, "", `apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: `+cfgName+`
spec:
  crossplane:
    version: ">=v2.0.0"
  dependsOn:
  - apiVersion: pkg.crossplane.io/v1
    kind: Function
    package: `+upstream+"/"+fnName+`
    version: ">=`+version+`"
`)
	if _, err := suite.c.PushPackage(s.ctx, fnXpkg, mirror+"/"+fnName+":"+version); err != nil {
		t.Fatal(err)
	}
	mirrorRef, err := suite.c.PushPackage(s.ctx, cfgXpkg, mirror+"/"+cfgName+":"+version)
	if err != nil {
		t.Fatal(err)
	}

	// The rewrite alone: Crossplane pulls from the mirror, anonymously.
	rewrite := &pkgv1beta1.ImageConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-mirror"},
		Spec: pkgv1beta1.ImageConfigSpec{
			MatchImages:  []pkgv1beta1.ImageMatch{{Type: pkgv1beta1.Prefix, Prefix: upstream + "/"}},
			RewriteImage: &pkgv1beta1.ImageRewrite{Prefix: mirror + "/"},
		},
	}
	if err := c.Create(s.ctx, rewrite); err != nil {
		t.Fatal(err)
	}
	upstreamRef := upstream + "/" + cfgName + ":" + version
	if err := suite.c.ApplyConfiguration(s.ctx, cfgName, upstreamRef); err != nil {
		t.Fatal(err)
	}
	var refused string
	s.eventually("Configuration "+cfgName+" reports the mirror's refusal", func() error {
		cfg := &pkgv1.Configuration{}
		if err := c.Get(s.ctx, types.NamespacedName{Name: cfgName}, cfg); err != nil {
			return err
		}
		for _, cd := range cfg.Status.Conditions {
			if strings.Contains(cd.Message, "UNAUTHORIZED") {
				refused = string(cd.Type) + "=" + string(cd.Status) + " " + string(cd.Reason) + ": " + cd.Message
				return nil
			}
		}
		return errors.Errorf("conditions %+v", cfg.Status.Conditions)
	})
	t.Logf("MEASURED without the mirror's credentials, Configuration %s says: %s", cfgName, refused)

	// The Configuration's own packagePullSecrets: its package installs, its
	// dependency does not (crossplane/crossplane#3294). The Lock says why.
	cfg := &pkgv1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: cfgName}}
	patch := `{"spec":{"packagePullSecrets":[{"name":"` + platform.RegistryCredentials + `"}]}}`
	if err := c.Patch(s.ctx, cfg, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	var unresolved string
	s.eventually("the Lock reports the dependency's refusal", func() error {
		if err := c.Get(s.ctx, types.NamespacedName{Name: cfgName}, cfg); err != nil {
			return err
		}
		if got := cfg.GetCondition(pkgv1.TypeInstalled); got.Status != corev1.ConditionTrue {
			return errors.Errorf("Configuration %s Installed=%s: %s", cfgName, got.Status, got.Message)
		}
		lock := &pkgv1beta1.Lock{}
		if err := c.Get(s.ctx, types.NamespacedName{Name: "lock"}, lock); err != nil {
			return err
		}
		r := lock.GetCondition(pkgv1beta1.TypeResolved)
		if r.Status != corev1.ConditionFalse || !strings.Contains(r.Message, fnName) || !strings.Contains(r.Message, "UNAUTHORIZED") {
			return errors.Errorf("Lock Resolved=%s: %s", r.Status, r.Message)
		}
		unresolved = "Lock Resolved=False " + string(r.Reason) + ": " + r.Message
		return nil
	})
	h := cfg.GetCondition(pkgv1.TypeHealthy)
	t.Logf("MEASURED with packagePullSecrets on the Configuration alone: Configuration %s Installed=True, Healthy=%s %s: %s; %s", cfgName, h.Status, h.Reason, h.Message, unresolved)

	// The credentials: an ImageConfig for the mirror's prefix, with the
	// pull Secret the suite's set-up created for its registry.
	creds := &pkgv1beta1.ImageConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-mirror-credentials"},
		Spec: pkgv1beta1.ImageConfigSpec{
			MatchImages: []pkgv1beta1.ImageMatch{{Type: pkgv1beta1.Prefix, Prefix: mirror + "/"}},
			Registry: &pkgv1beta1.RegistryConfig{Authentication: &pkgv1beta1.RegistryAuthentication{
				PullSecretRef: corev1.LocalObjectReference{Name: platform.RegistryCredentials},
			}},
		},
	}
	if err := c.Create(s.ctx, creds); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := suite.c.WaitConfiguration(s.ctx, cfgName, mirrorRef); err != nil {
		t.Fatal(err)
	}
	fn, err := suite.c.DependencyFunction(s.ctx, fnPkgName, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURED the Configuration and its dependency Healthy %s after the credentials' ImageConfig was created", time.Since(begin).Round(100*time.Millisecond))
	if !fn.Running() {
		t.Errorf("Function %s has no ready pod", fnPkgName)
	}

	if err := c.Get(s.ctx, types.NamespacedName{Name: cfgName}, cfg); err != nil {
		t.Fatal(err)
	}
	f := &pkgv1.Function{}
	if err := c.Get(s.ctx, types.NamespacedName{Name: fnPkgName}, f); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p                pkgObject
		pkg, resolvedPkg string
	}{
		{cfg, upstreamRef, mirrorRef},
		{f, upstream + "/" + fnName + ":" + version, mirror + "/" + fnName + ":" + version},
	} {
		k := kindOf(tc.p)
		var pkg, resolved string
		switch o := tc.p.(type) {
		case *pkgv1.Configuration:
			pkg, resolved = o.Spec.Package, o.Status.ResolvedPackage
		case *pkgv1.Function:
			pkg, resolved = o.Spec.Package, o.Status.ResolvedPackage
		}
		if pkg != tc.pkg || resolved != tc.resolvedPkg {
			t.Errorf("%s %s: package %q resolved to %q, want %q resolved to %q", k, tc.p.GetName(), pkg, resolved, tc.pkg, tc.resolvedPkg)
		}
		refs := tc.p.GetAppliedImageConfigRefs()
		for _, want := range []pkgv1.ImageConfigRef{
			{Name: rewrite.Name, Reason: pkgv1.ImageConfigReasonRewrite},
			{Name: creds.Name, Reason: pkgv1.ImageConfigReasonSetPullSecret},
		} {
			if !slices.Contains(refs, want) {
				t.Errorf("%s %s applied ImageConfigs %+v, want %+v among them", k, tc.p.GetName(), refs, want)
			}
		}
	}
	// The Lock, and so dependency resolution, keeps the names the packages
	// are published under; only fetching goes to the mirror.
	lock := &pkgv1beta1.Lock{}
	if err := c.Get(s.ctx, types.NamespacedName{Name: "lock"}, lock); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{upstream + "/" + cfgName, upstream + "/" + fnName} {
		if !slices.ContainsFunc(lock.Packages, func(p pkgv1beta1.LockPackage) bool { return p.Source == src }) {
			t.Errorf("Lock has no package %s", src)
		}
	}
	ds, err := packageDeployments(s, "function", fnPkgName)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if got := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(got, mirror+"/"+fnName) {
			t.Errorf("Deployment %s runs image %q, want the mirror's %s", d.Name, got, mirror+"/"+fnName)
		}
		if !slices.Contains(d.Spec.Template.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: platform.RegistryCredentials}) {
			t.Errorf("Deployment %s has imagePullSecrets %+v, want %s among them", d.Name, d.Spec.Template.Spec.ImagePullSecrets, platform.RegistryCredentials)
		}
	}
}

// buildPackage builds the package name from its crossplane.yaml meta, with
// the runtime image tarball image embedded unless "", under dir, and
// returns the package file.
func buildPackage(t *testing.T, s *scenario, dir, name, image, meta string) string {
	t.Helper()
	root := filepath.Join(dir, "pkg-"+name)
	if err := os.MkdirAll(root, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "crossplane.yaml"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".xpkg")
	if err := platform.BuildPackage(s.ctx, suite.crank, platform.PackageBuild{Root: root, Out: out, EmbedRuntimeImageTarball: image}); err != nil {
		t.Fatalf("cannot build package %s (make e2e builds the runtime images into _output/image): %v", name, err)
	}
	return out
}
