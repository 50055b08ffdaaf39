package harness

import (
	"context"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// InstallConfiguration installs the Configuration package ref (see
// PushPackage) as name, or points the existing Configuration name at ref,
// and returns once it is Installed and Healthy with ref's revision: Crossplane's
// package manager resolved and installed its dependencies (Providers and
// Functions named after their repositories, see DependencyProvider) and
// established its objects. On error the returned error names a diagnostics
// directory.
func (h *Harness) InstallConfiguration(ctx context.Context, name, ref string) error {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	if _, err := h.loopbackRef(ref); err != nil {
		return err
	}
	if err := h.ApplyConfiguration(ctx, name, ref); err != nil {
		return h.failed(err)
	}
	if err := h.WaitConfiguration(ctx, name, ref); err != nil {
		return h.failed(err)
	}
	h.log.Info("Configuration healthy", "package", name, "ref", ref, "duration", since(begin))
	return nil
}

// ApplyConfiguration creates the Configuration name for package ref, or
// points it at ref, and returns without waiting.
func (h *Harness) ApplyConfiguration(ctx context.Context, name, ref string) error {
	c := &pkgv1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Spec.Package = ref
	err := h.kube.Create(ctx, c)
	if kerrors.IsAlreadyExists(err) {
		err = h.kube.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"package":`+strconv.Quote(ref)+`}}`)))
	}
	return errors.Wrapf(err, "cannot apply Configuration %s", name)
}

// WaitConfiguration waits for the Configuration name to be Installed and
// Healthy at ref.
func (h *Harness) WaitConfiguration(ctx context.Context, name, ref string) error {
	last := ""
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		c := &pkgv1.Configuration{}
		if err := h.kube.Get(ctx, types.NamespacedName{Name: name}, c); err != nil {
			last = err.Error()
			return false, nil
		}
		inst, hl := c.GetCondition(pkgv1.TypeInstalled), c.GetCondition(pkgv1.TypeHealthy)
		last = "Installed=" + string(inst.Status) + " Healthy=" + string(hl.Status)
		if hl.Message != "" {
			last += ": " + hl.Message
		}
		if c.Status.ResolvedPackage != "" && c.Status.ResolvedPackage != ref {
			last += " (resolved " + c.Status.ResolvedPackage + ")"
			return false, nil
		}
		return inst.Status == corev1.ConditionTrue && hl.Status == corev1.ConditionTrue, nil
	})
	if err != nil {
		return errors.Wrapf(err, "cannot wait for Configuration %s to become healthy at %s (%s; the Lock: %s)", name, ref, last, h.lockStatus(ctx))
	}
	return nil
}

// lockStatus describes the package Lock's resolution condition, where
// Crossplane says why it cannot install a dependency.
func (h *Harness) lockStatus(ctx context.Context) string {
	l := &pkgv1beta1.Lock{}
	if err := h.kube.Get(ctx, types.NamespacedName{Name: "lock"}, l); err != nil {
		return err.Error()
	}
	c := l.GetCondition(pkgv1beta1.TypeResolved)
	return "Resolved=" + string(c.Status) + " " + c.Message
}

// DependencyProvider returns the runtime of the Provider name that
// Crossplane's package manager installed as a dependency, once it is
// healthy. With o.RuntimeConfig it first points the Provider at that
// DeploymentRuntimeConfig (a dependency is created with Crossplane's
// default) and waits for its Deployment to follow it and its pods to be
// ready. On error the returned error names a diagnostics directory.
func (h *Harness) DependencyProvider(ctx context.Context, name string, o InstallOptions) (*Runtime, error) {
	r, err := h.dependency(ctx, kindProvider, name, o)
	return r, h.failed(err)
}

// DependencyFunction is DependencyProvider for a Function.
func (h *Harness) DependencyFunction(ctx context.Context, name string, o InstallOptions) (*Runtime, error) {
	r, err := h.dependency(ctx, kindFunction, name, o)
	return r, h.failed(err)
}

// UpgradeProvider points the Provider name at package ref (with
// o.RuntimeConfig, if set) and returns its runtime once the revision of ref
// is healthy and its pods have replaced the old revision's. The time it
// takes counts as a rollout (ExpectRollout). On error the returned error
// names a diagnostics directory.
func (h *Harness) UpgradeProvider(ctx context.Context, name, ref string, o InstallOptions) (*Runtime, error) {
	r, err := h.upgrade(ctx, kindProvider, name, ref, o)
	return r, h.failed(err)
}

// UpgradeFunction is UpgradeProvider for a Function.
func (h *Harness) UpgradeFunction(ctx context.Context, name, ref string, o InstallOptions) (*Runtime, error) {
	r, err := h.upgrade(ctx, kindFunction, name, ref, o)
	return r, h.failed(err)
}

func (h *Harness) upgrade(ctx context.Context, kind pkgKind, name, ref string, o InstallOptions) (*Runtime, error) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	if _, err := h.loopbackRef(ref); err != nil {
		return nil, err
	}
	done := h.ExpectRollout()
	defer done()
	if err := h.applyPackage(ctx, kind, name, ref, o.RuntimeConfig); err != nil {
		return nil, err
	}
	h.node.poke()
	r, err := h.settle(ctx, kind, name, ref, o.RuntimeConfig)
	if err != nil {
		return nil, err
	}
	h.log.Info(string(kind)+" upgraded", "package", name, "ref", ref, "duration", since(begin), "pods", strings.Join(r.podNames(), ","))
	return r, nil
}

func (h *Harness) dependency(ctx context.Context, kind pkgKind, name string, o InstallOptions) (*Runtime, error) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	var obj client.Object = &pkgv1.Provider{}
	if kind == kindFunction {
		obj = &pkgv1.Function{}
	}
	if err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		return h.kube.Get(ctx, types.NamespacedName{Name: name}, obj) == nil, nil
	}); err != nil {
		return nil, errors.Wrapf(err, "cannot wait for Crossplane to install %s %s as a dependency (the Lock: %s)", kind, name, h.lockStatus(ctx))
	}
	if o.RuntimeConfig != "" {
		// A new runtime config makes a new revision.
		done := h.ExpectRollout()
		defer done()
		patch := []byte(`{"spec":{"runtimeConfigRef":{"name":` + strconv.Quote(o.RuntimeConfig) + `}}}`)
		if err := h.kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return nil, errors.Wrapf(err, "cannot point %s %s at DeploymentRuntimeConfig %s", kind, name, o.RuntimeConfig)
		}
		h.node.poke()
	}
	r, err := h.settle(ctx, kind, name, "", o.RuntimeConfig)
	if err != nil {
		return nil, err
	}
	h.log.Info(string(kind)+" healthy", "package", name, "duration", since(begin), "pods", strings.Join(r.podNames(), ","))
	return r, nil
}

// settle waits for the package's active revision (of image, unless "") to
// be healthy, the package to be healthy and, with a runtime config, for the
// revision's Deployment alone to run that config with every pod ready.
func (h *Harness) settle(ctx context.Context, kind pkgKind, name, image, runtimeConfig string) (*Runtime, error) {
	rev, err := h.waitRevisionHealthy(ctx, kind, name, image, runtimeConfig)
	if err != nil {
		return nil, err
	}
	if err := h.waitPackageHealthy(ctx, kind, name); err != nil {
		return nil, err
	}
	r := &Runtime{h: h, kind: kind, name: name}
	if runtimeConfig != "" {
		if err := h.waitRollout(ctx, r, runtimeConfig, rev.GetName()); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// waitRollout waits until the package's only Deployment is revision's, has
// the replicas and container args of the DeploymentRuntimeConfig drc, every
// replica of its current template is ready, and the node runs no other pod
// of the package.
func (h *Harness) waitRollout(ctx context.Context, r *Runtime, drc, revision string) error {
	cfg := &unstructured.Unstructured{}
	cfg.SetAPIVersion("pkg.crossplane.io/v1beta1")
	cfg.SetKind("DeploymentRuntimeConfig")
	if err := h.kube.Get(ctx, types.NamespacedName{Name: drc}, cfg); err != nil {
		return errors.Wrapf(err, "cannot get DeploymentRuntimeConfig %s", drc)
	}
	last := "no Deployment yet"
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		k, v := r.label()
		l := &appsv1.DeploymentList{}
		if err := h.kube.List(ctx, l, client.InNamespace(h.opts.Namespace)); err != nil {
			last = err.Error()
			return false, nil
		}
		// Crossplane labels the pods, not the Deployments.
		var ds []appsv1.Deployment
		for _, d := range l.Items {
			if d.Spec.Template.Labels[k] == v {
				ds = append(ds, d)
			}
		}
		if len(ds) != 1 || ds[0].Name != revision {
			names := make([]string, 0, len(ds))
			for _, d := range ds {
				names = append(names, d.Name)
			}
			last = "Deployments " + strings.Join(names, ", ") + ", want only " + revision
			return false, nil
		}
		for _, p := range r.podNames() {
			if !strings.HasPrefix(p, revision+"-") {
				last = "pod " + p + " of another revision still runs"
				return false, nil
			}
		}
		for _, d := range ds {
			if why := follows(cfg, &d); why != "" {
				last = "Deployment " + d.Name + " " + why
				return false, nil
			}
			want := ptr.Deref(d.Spec.Replicas, 1)
			if d.Status.ObservedGeneration != d.Generation || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
				last = "Deployment " + d.Name + ": " + strconv.Itoa(int(d.Status.ReadyReplicas)) + "/" + strconv.Itoa(int(want)) + " ready"
				return false, nil
			}
		}
		return true, nil
	})
	return errors.Wrapf(err, "cannot wait for %s %s to run as DeploymentRuntimeConfig %s says (%s)", r.kind, r.name, drc, last)
}

// follows says how Deployment d differs from what DeploymentRuntimeConfig
// cfg sets: its replicas and its containers' args. "" when it follows it.
func follows(cfg *unstructured.Unstructured, d *appsv1.Deployment) string {
	if n, ok, _ := unstructured.NestedInt64(cfg.Object, "spec", "deploymentTemplate", "spec", "replicas"); ok && int64(ptr.Deref(d.Spec.Replicas, 1)) != n {
		return "has " + strconv.Itoa(int(ptr.Deref(d.Spec.Replicas, 1))) + " replicas, not " + strconv.FormatInt(n, 10)
	}
	cs, _, _ := unstructured.NestedSlice(cfg.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		name, _ := m["name"].(string)
		args, ok, _ := unstructured.NestedStringSlice(m, "args")
		if !ok {
			continue
		}
		found := false
		for _, dc := range d.Spec.Template.Spec.Containers {
			if dc.Name != name {
				continue
			}
			found = true
			if strings.Join(dc.Args, " ") != strings.Join(args, " ") {
				return "container " + name + " has args " + strings.Join(dc.Args, " ")
			}
		}
		if !found {
			return "has no container " + name
		}
	}
	return ""
}
