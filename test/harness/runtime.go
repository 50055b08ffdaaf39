package harness

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// pkgKind is the kind of a package with a runtime.
type pkgKind string

const (
	kindFunction pkgKind = "Function"
	kindProvider pkgKind = "Provider"
)

// InstallOptions configure InstallFunction and InstallProvider.
type InstallOptions struct {
	// RuntimeConfig names the DeploymentRuntimeConfig the package uses
	// (spec.runtimeConfigRef). Default: Crossplane's "default".
	RuntimeConfig string
}

// InstallFunction installs the Function package ref (see PushPackage) as
// name, with the pull Secret LoopbackPullSecret, through Crossplane's
// package manager and returns its runtime once the Function is Installed
// and Healthy. Crossplane's Deployment runtime creates
// the function's ServiceAccount, Service, TLS Secret and Deployment; the
// harness's node runs the Deployment's pods from the runtime image embedded
// in the package. On error the returned error names a diagnostics directory.
func (h *Harness) InstallFunction(ctx context.Context, name, ref string, o InstallOptions) (*Runtime, error) {
	r, err := h.install(ctx, kindFunction, name, ref, o)
	return r, h.failed(err)
}

// InstallProvider installs the Provider package ref (see PushPackage) as
// name, like InstallFunction. Crossplane's RBAC manager binds the provider's
// ServiceAccount to the ClusterRole it renders for the revision: that, and
// nothing else, is what the provider's pods may do.
func (h *Harness) InstallProvider(ctx context.Context, name, ref string, o InstallOptions) (*Runtime, error) {
	r, err := h.install(ctx, kindProvider, name, ref, o)
	return r, h.failed(err)
}

func (h *Harness) install(ctx context.Context, kind pkgKind, name, ref string, o InstallOptions) (*Runtime, error) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	if _, err := h.loopbackRef(ref); err != nil {
		return nil, err
	}
	if err := h.applyPackage(ctx, kind, name, ref, o.RuntimeConfig); err != nil {
		return nil, err
	}
	h.node.poke()
	if _, err := h.waitRevisionHealthy(ctx, kind, name, "", ""); err != nil {
		return nil, err
	}
	if err := h.waitPackageHealthy(ctx, kind, name); err != nil {
		return nil, err
	}
	r := &Runtime{h: h, kind: kind, name: name}
	h.log.Info(string(kind)+" healthy", "package", name, "duration", since(begin), "pods", strings.Join(r.podNames(), ","))
	return r, nil
}

// A Runtime is the runtime of an installed package: the pods the harness's
// node runs for the package's Deployments.
type Runtime struct {
	h    *Harness
	kind pkgKind
	name string
}

// label is the pod label Crossplane's Deployment runtime gives the
// package's pods.
func (r *Runtime) label() (string, string) {
	return "pkg.crossplane.io/" + strings.ToLower(string(r.kind)), r.name
}

// Pods returns the package's pods.
func (r *Runtime) Pods() []*Pod {
	ps := r.h.node.podsLabelled(r.label())
	out := make([]*Pod, 0, len(ps))
	for _, p := range ps {
		out = append(out, &Pod{p: p, h: r.h})
	}
	return out
}

func (r *Runtime) podNames() []string {
	pods := r.Pods()
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name())
	}
	return out
}

// Running reports whether any pod of the package is ready.
func (r *Runtime) Running() bool {
	for _, p := range r.Pods() {
		if p.Ready() {
			return true
		}
	}
	return false
}

// Kill sends SIGKILL to every pod's container: a crash. The node restarts
// the containers (restartPolicy Always).
func (r *Runtime) Kill() error {
	pods := r.Pods()
	errs := make([]error, 0, len(pods))
	for _, p := range pods {
		errs = append(errs, p.Kill())
	}
	return errors.Join(errs...)
}

// Stop stops the package's pods and keeps them stopped until Start, as if no
// node could run them. It returns once they are gone.
func (r *Runtime) Stop() error {
	k, v := r.label()
	r.h.node.hold(k+"="+v, true)
	return wait.Poll(context.Background(), 100*time.Millisecond, func(context.Context) (bool, error) {
		return len(r.Pods()) == 0, nil
	})
}

// Start lets the node run the package's pods again and waits until one is
// ready.
func (r *Runtime) Start() error {
	k, v := r.label()
	r.h.node.hold(k+"="+v, false)
	ctx, cancel := context.WithTimeout(context.Background(), r.h.opts.StartTimeout)
	defer cancel()
	return errors.Wrapf(wait.Poll(ctx, 100*time.Millisecond, func(context.Context) (bool, error) {
		return r.Running(), nil
	}), "cannot wait for a pod of %s %s to be ready", r.kind, r.name)
}

// Forward returns a loopback address whose connections the harness forwards
// to port in one of the package's ready pods, chosen per connection (like
// `kubectl port-forward` to a Service). It lasts as long as the harness.
func (r *Runtime) Forward(port int) (string, error) {
	return r.h.forward(func(ctx context.Context) (net.Conn, error) {
		last := errors.Errorf("%s %s has no ready pod", r.kind, r.name)
		for _, p := range r.Pods() {
			if !p.Ready() {
				continue
			}
			c, err := p.p.dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				return c, nil
			}
			last = err
		}
		return nil, last
	})
}

// A Pod is one pod of a package's runtime.
type Pod struct {
	p *pod
	h *Harness
}

// Name is the pod's name, which is also its hostname.
func (p *Pod) Name() string { return p.p.name }

// Ready reports whether the pod's container runs and passes its readiness
// probe.
func (p *Pod) Ready() bool {
	ok, _ := p.p.status()
	return ok
}

// PID is the container process's ID, or 0 when it is not running.
func (p *Pod) PID() int {
	if pr := p.p.process(); pr != nil {
		return pr.PID()
	}
	return 0
}

// LogPath is the file the pod's container logs to, across restarts.
func (p *Pod) LogPath() string { return p.p.logPath() }

// Kill sends SIGKILL to the pod's container; the node restarts it.
func (p *Pod) Kill() error {
	if pr := p.p.process(); pr != nil {
		return pr.Kill()
	}
	return nil
}

// Forward returns a loopback address forwarded to port in this pod (like
// `kubectl port-forward pod/NAME`).
func (p *Pod) Forward(port int) (string, error) {
	return p.h.forward(func(ctx context.Context) (net.Conn, error) {
		return p.p.dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	})
}

// forward listens on a free loopback port and forwards its connections to
// what dial returns, until the harness stops.
func (h *Harness) forward(dial func(ctx context.Context) (net.Conn, error)) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Wrap(err, "cannot listen for a port-forward")
	}
	h.mu.Lock()
	h.forwards = append(h.forwards, l)
	h.mu.Unlock()
	go forward(l, dial)
	return l.Addr().String(), nil
}

// revisionObject is a package revision as the client sees it.
type revisionObject interface {
	client.Object
	pkgv1.PackageRevision
}

// revisions lists the revisions of the named package.
func (h *Harness) revisions(ctx context.Context, kind pkgKind, name string) ([]revisionObject, error) {
	sel := client.MatchingLabels{pkgv1.LabelParentPackage: name}
	var out []revisionObject
	switch kind {
	case kindFunction:
		l := &pkgv1.FunctionRevisionList{}
		if err := h.kube.List(ctx, l, sel); err != nil {
			return nil, errors.Wrap(err, "cannot list FunctionRevisions")
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case kindProvider:
		l := &pkgv1.ProviderRevisionList{}
		if err := h.kube.List(ctx, l, sel); err != nil {
			return nil, errors.Wrap(err, "cannot list ProviderRevisions")
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out, nil
}

// failed adds a diagnostics dump to a non-nil error.
func (h *Harness) failed(err error) error {
	if err == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, derr := h.DumpDiagnostics(dctx, "")
	if derr != nil {
		return errors.Wrapf(err, "(cannot write diagnostics: %v)", derr)
	}
	h.log.Info("Wrote diagnostics", "dir", d)
	return errors.Wrapf(err, "diagnostics in %s", d)
}

// applyPackage creates the Function or Provider, or points an existing one
// at ref (and runtimeConfig).
func (h *Harness) applyPackage(ctx context.Context, kind pkgKind, name, ref, runtimeConfig string) error {
	var obj client.Object
	switch kind {
	case kindFunction:
		f := &pkgv1.Function{ObjectMeta: metav1.ObjectMeta{Name: name}}
		f.Spec.Package = ref
		f.Spec.PackagePullSecrets = []corev1.LocalObjectReference{{Name: LoopbackPullSecret}}
		if runtimeConfig != "" {
			f.SetRuntimeConfigRef(&pkgv1.RuntimeConfigReference{Name: runtimeConfig})
		}
		obj = f
	case kindProvider:
		p := &pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.Package = ref
		p.Spec.PackagePullSecrets = []corev1.LocalObjectReference{{Name: LoopbackPullSecret}}
		if runtimeConfig != "" {
			p.SetRuntimeConfigRef(&pkgv1.RuntimeConfigReference{Name: runtimeConfig})
		}
		obj = p
	}
	err := h.kube.Create(ctx, obj)
	if kerrors.IsAlreadyExists(err) {
		patch := []byte(`{"spec":{"package":` + strconv.Quote(ref) + `}}`)
		if runtimeConfig != "" {
			patch = []byte(`{"spec":{"package":` + strconv.Quote(ref) + `,"runtimeConfigRef":{"name":` + strconv.Quote(runtimeConfig) + `}}}`)
		}
		err = h.kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	}
	return errors.Wrapf(err, "cannot apply %s %s", kind, name)
}

// waitRevisionHealthy waits for the package's active revision (of package
// ref image and with DeploymentRuntimeConfig runtimeConfig, unless "") to be
// RevisionHealthy: pulled, parsed, and its objects (CRDs, MRDs) applied.
func (h *Harness) waitRevisionHealthy(ctx context.Context, kind pkgKind, name, image, runtimeConfig string) (revisionObject, error) {
	var found revisionObject
	last := "no active revision yet"
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		revs, err := h.revisions(ctx, kind, name)
		if err != nil {
			return false, nil // Keep waiting.
		}
		for _, rev := range revs {
			if rev.GetDesiredState() != pkgv1.PackageRevisionActive {
				continue
			}
			if image != "" && rev.GetSource() != image {
				last = "active revision " + rev.GetName() + " is of " + rev.GetSource()
				continue
			}
			if rr, ok := rev.(pkgv1.PackageRevisionWithRuntime); ok && runtimeConfig != "" {
				if ref := rr.GetRuntimeConfigRef(); ref == nil || ref.Name != runtimeConfig {
					last = "active revision " + rev.GetName() + " does not use DeploymentRuntimeConfig " + runtimeConfig + " yet"
					continue
				}
			}
			c := rev.GetCondition(pkgv1.TypeRevisionHealthy)
			if c.Status == corev1.ConditionTrue {
				found = rev
				return true, nil
			}
			last = "revision " + rev.GetName() + " RevisionHealthy=" + string(c.Status)
			if c.Message != "" {
				last += ": " + c.Message
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, errors.Wrapf(err, "cannot wait for %s %s to be unpacked (%s)", kind, name, last)
	}
	return found, nil
}

// waitPackageHealthy waits for the package to be Installed and Healthy.
func (h *Harness) waitPackageHealthy(ctx context.Context, kind pkgKind, name string) error {
	last := ""
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		var obj interface {
			client.Object
			GetCondition(ct xpv2.ConditionType) xpv2.Condition
		}
		switch kind {
		case kindFunction:
			obj = &pkgv1.Function{}
		case kindProvider:
			obj = &pkgv1.Provider{}
		}
		if err := h.kube.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
			last = err.Error()
			return false, nil
		}
		inst, hl := obj.GetCondition(pkgv1.TypeInstalled), obj.GetCondition(pkgv1.TypeHealthy)
		last = "Installed=" + string(inst.Status) + " Healthy=" + string(hl.Status)
		if hl.Message != "" {
			last += ": " + hl.Message
		}
		return inst.Status == corev1.ConditionTrue && hl.Status == corev1.ConditionTrue, nil
	})
	return errors.Wrapf(err, "cannot wait for %s %s to become healthy (%s)", kind, name, last)
}

// crdEstablished reports whether the named CRD is established.
func (h *Harness) crdEstablished(ctx context.Context, name string) bool {
	crd := &extv1.CustomResourceDefinition{}
	if err := h.kube.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		return false
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == extv1.Established && c.Status == extv1.ConditionTrue {
			return true
		}
	}
	return false
}
