package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// syncInterval is how often the runtime player re-asserts what it reports on
// package revisions.
const syncInterval = time.Second

// pkgKind is the kind of a package with a runtime.
type pkgKind string

const (
	kindFunction pkgKind = "Function"
	kindProvider pkgKind = "Provider"
)

// A packageRuntime is one package whose runtime the harness plays.
type packageRuntime struct {
	kind pkgKind
	name string
	// Secrets in Crossplane's namespace, as the Deployment runtime names
	// them: <package>-tls-server (both kinds), <package>-tls-client
	// (providers).
	serverSecret string
	clientSecret string
	// endpoint is the gRPC target core dials (functions only).
	endpoint string

	mu    sync.Mutex
	proc  *Process
	ready bool
}

func (rt *packageRuntime) key() string { return string(rt.kind) + "/" + rt.name }

// state reports whether the runtime is up, and why not.
func (rt *packageRuntime) state() (bool, string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.proc == nil:
		return false, "waiting for the package revision to be healthy before the harness starts the runtime process"
	case !rt.ready:
		return false, "the harness started the runtime process and is waiting for it to be ready"
	case !rt.proc.Running():
		msg := "the harness's runtime process is not running"
		if err := rt.proc.Err(); err != nil {
			msg += ": " + err.Error()
		}
		return false, msg
	}
	return true, ""
}

// runtimePlayer does what Crossplane's Deployment runtime does for the
// packages the harness installed, with processes instead of Deployments: it
// keeps each active revision's status.tlsServerSecretName (and
// tlsClientSecretName), a FunctionRevision's status.endpoint, and the
// RuntimeHealthy and RuntimeActive conditions in line with the process the
// harness runs for it.
type runtimePlayer struct {
	h *Harness

	mu       sync.Mutex
	runtimes map[string]*packageRuntime
	healthy  map[string]bool

	kick   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newRuntimePlayer(h *Harness) *runtimePlayer {
	return &runtimePlayer{
		h:        h,
		runtimes: map[string]*packageRuntime{},
		healthy:  map[string]bool{},
		kick:     make(chan struct{}, 1),
		cancel:   func() {},
	}
}

func (r *runtimePlayer) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(syncInterval)
		defer t.Stop()
		for {
			r.syncAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-r.kick:
			}
		}
	}()
}

// stop ends the loop and stops every runtime process.
func (r *runtimePlayer) stop() error {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rt := range r.runtimes {
		rt.mu.Lock()
		p := rt.proc
		rt.mu.Unlock()
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	return errors.Join(errs...)
}

// add registers rt, replacing (and stopping the process of) a runtime the
// harness played for the same package before.
func (r *runtimePlayer) add(rt *packageRuntime) error {
	r.mu.Lock()
	old := r.runtimes[rt.key()]
	r.runtimes[rt.key()] = rt
	delete(r.healthy, rt.key())
	r.mu.Unlock()
	r.poke()
	if old == nil {
		return nil
	}
	old.mu.Lock()
	p := old.proc
	old.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop()
}

func (r *runtimePlayer) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *runtimePlayer) syncAll(ctx context.Context) {
	r.mu.Lock()
	rts := make([]*packageRuntime, 0, len(r.runtimes))
	for _, rt := range r.runtimes {
		rts = append(rts, rt)
	}
	r.mu.Unlock()
	for _, rt := range rts {
		if err := r.sync(ctx, rt); err != nil && ctx.Err() == nil && !kerrors.IsConflict(err) {
			r.h.log.Info("Cannot update package revision runtime status", "kind", rt.kind, "package", rt.name, "error", err)
		}
	}
}

// sync reports rt on the active revision of its package.
func (r *runtimePlayer) sync(ctx context.Context, rt *packageRuntime) error {
	healthy, why := rt.state()
	r.mu.Lock()
	was, seen := r.healthy[rt.key()]
	r.healthy[rt.key()] = healthy
	r.mu.Unlock()
	if seen && was != healthy {
		r.h.log.Info("Package runtime changed", "kind", rt.kind, "package", rt.name, "healthy", healthy, "reason", why)
	}

	revs, err := r.h.revisions(ctx, rt.kind, rt.name)
	if err != nil {
		return err
	}
	for _, rev := range revs {
		if rev.GetDesiredState() != pkgv1.PackageRevisionActive {
			continue
		}
		if !r.desired(rt, rev, healthy, why) {
			continue
		}
		if err := r.h.kube.Status().Update(ctx, rev); err != nil {
			return errors.Wrapf(err, "cannot update status of %s %s", rev.GetObjectKind().GroupVersionKind().Kind, rev.GetName())
		}
	}
	return nil
}

// desired sets what the runtime reports on rev, and returns whether that
// changed anything.
func (r *runtimePlayer) desired(rt *packageRuntime, rev revisionObject, healthy bool, why string) bool {
	changed := false
	want := []xpv2.Condition{pkgv1.RuntimeHealthy(), pkgv1.RuntimeActive()}
	if !healthy {
		want = []xpv2.Condition{pkgv1.RuntimeUnhealthy().WithMessage(why), pkgv1.RuntimeActive()}
	}
	for _, c := range want {
		c.ObservedGeneration = rev.GetGeneration()
		if !rev.GetCondition(c.Type).Equal(c) {
			rev.SetConditions(c)
			changed = true
		}
	}
	setName := func(got **string, want string) {
		if want != "" && ptr.Deref(*got, "") != want {
			*got = ptr.To(want)
			changed = true
		}
	}
	switch rv := rev.(type) {
	case *pkgv1.FunctionRevision:
		setName(&rv.Status.TLSServerSecretName, rt.serverSecret)
		if rv.Status.Endpoint != rt.endpoint {
			rv.Status.Endpoint = rt.endpoint
			changed = true
		}
	case *pkgv1.ProviderRevision:
		setName(&rv.Status.TLSServerSecretName, rt.serverSecret)
		setName(&rv.Status.TLSClientSecretName, rt.clientSecret)
	}
	return changed
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

// InstallFunction installs the Function package ref (see PushPackage) as
// name and plays its runtime, as Crossplane's Deployment runtime would:
//
//   - it issues a TLS server certificate signed by Crossplane's root CA
//     (Secret crossplane-root-ca) for 127.0.0.1 and the function's service
//     names, stores it in the Secret <name>-tls-server and in
//     <Dir>/runtimes/<name>/tls-server (tls.crt, tls.key, ca.crt);
//   - it sets the active FunctionRevision's status.tlsServerSecretName
//     (Crossplane waits for it before installing the package's objects) and
//     status.endpoint (dns:///127.0.0.1:PORT, the target core dials);
//   - once the revision is healthy it runs cmd with --tls-certs-dir and
//     --address=127.0.0.1:PORT appended (function-sdk-go's flags), waits
//     for an mTLS handshake (or cmd.Ready) to succeed, and reports the
//     revision RuntimeHealthy.
//
// It returns the function's process once the Function is Installed and
// Healthy. Stop stops the process; while it is not running the revision
// reports RuntimeHealthy=False, so the Function turns unhealthy. On error the
// returned error names a diagnostics directory.
func (h *Harness) InstallFunction(ctx context.Context, name, ref string, cmd Command) (*Process, error) {
	p, err := h.install(ctx, kindFunction, name, ref, cmd)
	return p, h.failed(err)
}

// InstallProvider installs the Provider package ref (see PushPackage) as
// name and plays its runtime, as Crossplane's Deployment runtime would: it
// creates the Secrets <name>-tls-server and <name>-tls-client (certificates
// signed by Crossplane's root CA, also written to
// <Dir>/runtimes/<name>/tls-{server,client} and passed to the process as
// TLS_SERVER_CERTS_DIR and TLS_CLIENT_CERTS_DIR) and sets the active
// ProviderRevision's status.tlsServerSecretName and tlsClientSecretName.
// Once the revision is healthy and every CRD it installed is established -
// Crossplane v2 turns managed resource CRDs into ManagedResourceDefinitions,
// active unless the provider declares the safe-start capability (which
// Options.Activations then activates) - it runs cmd (KUBECONFIG is the admin
// kubeconfig) and reports the revision RuntimeHealthy once cmd.Ready passes
// (or at once without it). It returns the provider's process once the
// Provider is Installed and Healthy.
func (h *Harness) InstallProvider(ctx context.Context, name, ref string, cmd Command) (*Process, error) {
	p, err := h.install(ctx, kindProvider, name, ref, cmd)
	return p, h.failed(err)
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

func (h *Harness) install(ctx context.Context, kind pkgKind, name, ref string, cmd Command) (*Process, error) { // A linear sequence of steps.
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	if _, err := h.loopbackRef(ref); err != nil {
		return nil, err
	}
	if err := h.applyPackage(ctx, kind, name, ref); err != nil {
		return nil, err
	}
	rev, err := h.waitActiveRevision(ctx, kind, name)
	if err != nil {
		return nil, err
	}

	// What the Deployment runtime's pre-establish hook does: TLS Secrets,
	// and for functions the endpoint.
	rt := &packageRuntime{kind: kind, name: name, serverSecret: name + pkgv1.TLSServerSecretNameSuffix}
	ca, err := h.rootCA(ctx)
	if err != nil {
		return nil, err
	}
	owner := metav1.OwnerReference{
		APIVersion: pkgv1.SchemeGroupVersion.String(),
		Kind:       string(kind) + "Revision",
		Name:       rev.GetName(),
		UID:        rev.GetUID(),
	}
	ns := h.opts.Namespace
	svcNames := []string{name, name + "." + ns, name + "." + ns + ".svc", "localhost"}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	serverDir := filepath.Join(h.dir, "runtimes", name, "tls-server")
	if err := h.issueTLS(ctx, ca, x509.ExtKeyUsageServerAuth, name, svcNames, loopback, rt.serverSecret, serverDir, owner); err != nil {
		return nil, err
	}
	cmd.Args = append([]string{}, cmd.Args...)
	cmd.Env = append([]string{"TLS_SERVER_CERTS_DIR=" + serverDir}, cmd.Env...)
	switch kind {
	case kindFunction:
		port, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd.Args = append(cmd.Args, "--tls-certs-dir="+serverDir, "--address="+addr)
		rt.endpoint = "dns:///" + addr
		if cmd.Ready == nil {
			cmd.Ready = h.functionTLSReady(addr, ca)
		}
	case kindProvider:
		rt.clientSecret = name + pkgv1.TLSClientSecretNameSuffix
		clientDir := filepath.Join(h.dir, "runtimes", name, "tls-client")
		if err := h.issueTLS(ctx, ca, x509.ExtKeyUsageClientAuth, name, []string{rev.GetName()}, nil, rt.clientSecret, clientDir, owner); err != nil {
			return nil, err
		}
		cmd.Env = append([]string{"TLS_CLIENT_CERTS_DIR=" + clientDir}, cmd.Env...)
	}
	if err := h.rt.add(rt); err != nil {
		return nil, err
	}

	rev, err = h.waitRevisionHealthy(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	h.log.Info("Package revision healthy", "kind", kind, "package", name, "revision", rev.GetName(), "duration", since(begin))
	if kind == kindProvider {
		if err := h.waitEstablished(ctx, rev); err != nil {
			return nil, err
		}
	}

	// What the post-establish hook does: run the runtime.
	p := h.newProcess(name, cmd)
	if err := p.Start(); err != nil {
		return nil, err
	}
	rt.mu.Lock()
	rt.proc = p
	rt.mu.Unlock()
	if err := h.waitProcessReady(ctx, kind, name, p, cmd.Ready); err != nil {
		return p, err
	}
	rt.mu.Lock()
	rt.ready = true
	rt.mu.Unlock()
	h.rt.poke()
	if err := h.waitPackageHealthy(ctx, kind, name); err != nil {
		return p, err
	}
	h.log.Info(string(kind)+" healthy", "package", name, "duration", since(begin), "pid", p.PID(), "endpoint", rt.endpoint, "log", p.LogPath())
	return p, nil
}

// applyPackage creates the Function or Provider, or points an existing one
// at ref.
func (h *Harness) applyPackage(ctx context.Context, kind pkgKind, name, ref string) error {
	var obj client.Object
	switch kind {
	case kindFunction:
		f := &pkgv1.Function{ObjectMeta: metav1.ObjectMeta{Name: name}}
		f.Spec.Package = ref
		obj = f
	case kindProvider:
		p := &pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.Package = ref
		obj = p
	}
	err := h.kube.Create(ctx, obj)
	if kerrors.IsAlreadyExists(err) {
		patch := []byte(`{"spec":{"package":` + strconv.Quote(ref) + `}}`)
		err = h.kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	}
	return errors.Wrapf(err, "cannot apply %s %s", kind, name)
}

// waitActiveRevision waits for the package manager to create the package's
// active revision.
func (h *Harness) waitActiveRevision(ctx context.Context, kind pkgKind, name string) (revisionObject, error) {
	var found revisionObject
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		revs, err := h.revisions(ctx, kind, name)
		if err != nil {
			return false, nil // Keep waiting.
		}
		for _, rev := range revs {
			if rev.GetDesiredState() == pkgv1.PackageRevisionActive {
				found = rev
				return true, nil
			}
		}
		return false, nil
	})
	return found, errors.Wrapf(err, "cannot wait for %s %s to have an active revision", kind, name)
}

// waitRevisionHealthy waits for the package's active revision to be
// RevisionHealthy: pulled, parsed, and its objects (CRDs, MRDs) applied.
func (h *Harness) waitRevisionHealthy(ctx context.Context, kind pkgKind, name string) (revisionObject, error) {
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

// waitEstablished waits for the CRDs a revision installed, and for the CRDs
// of its active ManagedResourceDefinitions, to be established, so a provider
// that starts watching them right away finds them served.
func (h *Harness) waitEstablished(ctx context.Context, rev revisionObject) error {
	last := ""
	err := wait.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		for _, ref := range rev.GetObjects() {
			switch ref.Kind {
			case xpextv1alpha1.ManagedResourceDefinitionKind:
				mrd := &xpextv1alpha1.ManagedResourceDefinition{}
				if err := h.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, mrd); err != nil {
					last = "cannot get MRD " + ref.Name
					return false, nil
				}
				if mrd.Spec.State != xpextv1alpha1.ManagedResourceDefinitionActive {
					continue
				}
				if mrd.GetCondition(xpextv1alpha1.TypeEstablished).Status != corev1.ConditionTrue {
					last = "MRD " + ref.Name + " not established"
					return false, nil
				}
				if !h.crdEstablished(ctx, ref.Name) {
					last = "CRD " + ref.Name + " not established"
					return false, nil
				}
			case "CustomResourceDefinition":
				if !h.crdEstablished(ctx, ref.Name) {
					last = "CRD " + ref.Name + " not established"
					return false, nil
				}
			}
		}
		return true, nil
	})
	return errors.Wrapf(err, "cannot wait for the CRDs of %s to be established (%s)", rev.GetName(), last)
}

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

// waitProcessReady polls ready (if any), failing fast if p exits.
func (h *Harness) waitProcessReady(ctx context.Context, kind pkgKind, name string, p *Process, ready func(context.Context) error) error {
	exited := p.Exited()
	var last error
	err := wait.Poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.Errorf("process exited (%v): %s", p.Err(), tailFile(p.LogPath(), 5))
		default:
		}
		if ready == nil {
			return true, nil
		}
		last = ready(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		err = errors.Wrapf(err, "last check: %v", last)
	}
	return errors.Wrapf(err, "cannot wait for %s %s's process to be ready (log: %s)", kind, name, p.LogPath())
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

// rootCA reads the CA `crossplane core init` created.
func (h *Harness) rootCA(ctx context.Context) (*certAuthority, error) {
	s := &corev1.Secret{}
	if err := h.kube.Get(ctx, types.NamespacedName{Namespace: h.opts.Namespace, Name: RootCASecret}, s); err != nil {
		return nil, errors.Wrap(err, "cannot get Crossplane's root CA Secret")
	}
	return caFromSecret(s)
}

// issueTLS issues a certificate signed by ca and stores it (with ca.crt) in
// the named Secret in Crossplane's namespace and in dir.
func (h *Harness) issueTLS(ctx context.Context, ca *certAuthority, usage x509.ExtKeyUsage, cn string, dnsNames []string, ips []net.IP, secret, dir string, owner metav1.OwnerReference) error {
	c, err := ca.issue(usage, cn, dnsNames, ips)
	if err != nil {
		return err
	}
	if err := writeTLSDir(dir, c.certPEM, c.keyPEM, ca.certPEM); err != nil {
		return errors.Wrapf(err, "cannot write TLS certificates for %s", cn)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.opts.Namespace, Name: secret}}
	data := map[string][]byte{corev1.TLSCertKey: c.certPEM, corev1.TLSPrivateKeyKey: c.keyPEM, "ca.crt": ca.certPEM}
	err = h.kube.Get(ctx, client.ObjectKeyFromObject(s), s)
	switch {
	case kerrors.IsNotFound(err):
		s.Data = data
		s.OwnerReferences = []metav1.OwnerReference{owner}
		err = h.kube.Create(ctx, s)
	case err == nil:
		s.Data = data
		if !slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.UID }) {
			s.OwnerReferences = append(s.OwnerReferences, owner)
		}
		err = h.kube.Update(ctx, s)
	}
	return errors.Wrapf(err, "cannot apply TLS Secret %s", secret)
}

// functionTLSReady returns a check that completes an mTLS handshake with the
// function the way core will: verifying its certificate for 127.0.0.1
// against the root CA, presenting core's client certificate, offering h2.
func (h *Harness) functionTLSReady(addr string, ca *certAuthority) func(ctx context.Context) error {
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return func(ctx context.Context) error {
		clientDir := filepath.Join(h.dir, "tls", "core-client")
		crt, err := tls.LoadX509KeyPair(filepath.Join(clientDir, corev1.TLSCertKey), filepath.Join(clientDir, corev1.TLSPrivateKeyKey))
		if err != nil {
			return errors.Wrap(err, "cannot load Crossplane's client certificate")
		}
		d := &tls.Dialer{
			NetDialer: &net.Dialer{Timeout: 2 * time.Second},
			Config: &tls.Config{
				MinVersion:   tls.VersionTLS12,
				RootCAs:      roots,
				Certificates: []tls.Certificate{crt},
				ServerName:   "127.0.0.1",
				NextProtos:   []string{"h2"},
			},
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return errors.Wrap(err, "cannot complete a TLS handshake with the function")
		}
		return c.Close()
	}
}
