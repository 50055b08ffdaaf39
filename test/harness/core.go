package harness

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// The Secrets `crossplane core init` fills, named as the Helm chart names
// them (core init has no defaults for these).
const (
	// RootCASecret holds the CA (tls.crt, tls.key) that signs Crossplane's
	// client certificate and every function's server certificate.
	RootCASecret = "crossplane-root-ca"
	// ClientTLSSecret holds the client certificate (tls.crt, tls.key,
	// ca.crt) core presents to functions.
	ClientTLSSecret = "crossplane-tls-client"
	// ServerTLSSecret holds the certificate of core's webhook server
	// (tls.crt, tls.key, ca.crt) for WebhookService's DNS names. Its tls.crt
	// is also the caBundle of core's webhook configurations.
	ServerTLSSecret = "crossplane-tls-server"
)

// Core's webhooks, as the Helm chart (webhooks.enabled=true, the default)
// sets them up: `core init` points core's ValidatingWebhookConfigurations at
// this Service and issues ServerTLSSecret for its DNS names.
const (
	// WebhookService is the Service in Crossplane's namespace in front of
	// core's webhook server.
	WebhookService = "crossplane-webhooks"
	// WebhookPort is the port of WebhookService (and, in a cluster, of
	// core's container).
	WebhookPort = 9443
)

// coreLabels are the labels of core's pod in the Helm chart, which
// WebhookService selects.
var coreLabels = map[string]string{"app": "crossplane", "release": "crossplane"}

// coreInitAttempts is how often `core init` is tried: its first run can race
// the Lock CRD it just created ("no matches for kind Lock").
const coreInitAttempts = 3

// startCrossplane runs `crossplane core init` and `crossplane core start`
// and waits until core's controllers are working.
func (h *Harness) startCrossplane(ctx context.Context) error {
	ns := h.opts.Namespace
	// In a cluster the Helm chart creates these.
	if err := h.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create Crossplane namespace")
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultServiceAccount}}
	if err := h.kube.Create(ctx, sa); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create Crossplane service account")
	}

	if err := h.createWebhookService(ctx); err != nil {
		return err
	}

	if err := h.crossplaneIdentities(ctx); err != nil {
		return err
	}

	t := time.Now()
	if err := h.coreInit(ctx); err != nil {
		return err
	}
	h.log.Info("crossplane core init done", "duration", since(t))

	// Core presents the client certificate init generated when it calls
	// functions, and serves its webhooks with the server certificate; it
	// reads each from a directory, as if the Secret were mounted.
	clientDir := filepath.Join(h.dir, "tls", "core-client")
	if err := h.secretToTLSDir(ctx, ClientTLSSecret, clientDir); err != nil {
		return err
	}
	serverDir := filepath.Join(h.dir, "tls", "core-server")
	if err := h.secretToTLSDir(ctx, ServerTLSSecret, serverDir); err != nil {
		return err
	}

	t = time.Now()
	var err error
	if h.coreMetricsPort, err = proc.FreePort(); err != nil {
		return err
	}
	if h.coreHealthPort, err = proc.FreePort(); err != nil {
		return err
	}
	if h.coreWebhookPort, err = proc.FreePort(); err != nil {
		return err
	}
	// The node forwards WebhookService's ClusterIP to core's webhook
	// server, as kube-proxy forwards it to core's pod in a cluster.
	h.node.addHostEndpoint(hostEndpoint{
		name:   "crossplane",
		labels: coreLabels,
		ports:  []corev1.ContainerPort{{Name: "webhooks", ContainerPort: WebhookPort}},
		addrs:  map[int]string{WebhookPort: net.JoinHostPort("127.0.0.1", strconv.Itoa(h.coreWebhookPort))},
	})
	// Core resolves the DNS names of functions' Services (dns:///<fn>.<ns>:9443)
	// through the node's hosts file, bind-mounted over /etc/hosts in a mount
	// namespace of core's own.
	args := []string{
		"--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, h.node.hosts,
		h.tools.Crossplane, "core", "start",
		"--package-runtime=Deployment",
		"--xpkg-cache-dir=" + filepath.Join(h.dir, "cache", "xpkg"),
		"--xfn-cache-dir=" + filepath.Join(h.dir, "cache", "xfn"),
		"--tls-client-certs-dir=" + clientDir,
		"--tls-server-certs-dir=" + serverDir,
		"--webhook-port=" + strconv.Itoa(h.coreWebhookPort),
		"--metrics-port=" + strconv.Itoa(h.coreMetricsPort),
		"--health-probe-port=" + strconv.Itoa(h.coreHealthPort),
	}
	if h.opts.Debug {
		args = append(args, "--debug")
	}
	args = append(args, h.opts.CoreArgs...)
	h.core = h.newProcess("crossplane", Command{
		Path: "unshare",
		Args: args,
		Env: []string{
			"TLS_CLIENT_SECRET_NAME=" + ClientTLSSecret, "TLS_SERVER_SECRET_NAME=" + ServerTLSSecret,
			"LEADER_ELECTION=false", "KUBECONFIG=" + h.coreKubeconfig,
		},
	})
	if err := h.core.Start(); err != nil {
		return err
	}
	if err := h.waitCoreReady(ctx); err != nil {
		return err
	}
	h.log.Info("crossplane core ready", "duration", since(t), "metrics", h.CoreMetricsURL(), "webhook-port", h.coreWebhookPort)
	return nil
}

// createWebhookService creates the Service in front of core's webhook
// server, as the Helm chart does.
func (h *Harness) createWebhookService(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.opts.Namespace, Name: WebhookService, Labels: coreLabels},
		Spec: corev1.ServiceSpec{
			Selector: coreLabels,
			Ports:    []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: WebhookPort, TargetPort: intstr.FromInt32(WebhookPort)}},
		},
	}
	if err := h.kube.Create(ctx, svc); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create Crossplane's webhook Service")
	}
	return nil
}

// secretToTLSDir writes the tls.crt, tls.key and ca.crt of a TLS Secret
// `core init` filled into dir.
func (h *Harness) secretToTLSDir(ctx context.Context, name, dir string) error {
	s := &corev1.Secret{}
	if err := h.kube.Get(ctx, types.NamespacedName{Namespace: h.opts.Namespace, Name: name}, s); err != nil {
		return errors.Wrapf(err, "cannot get TLS Secret %s", name)
	}
	return errors.Wrapf(writeTLSDir(dir, s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], s.Data["ca.crt"]),
		"cannot write the certificates of TLS Secret %s", name)
}

// crossplaneIdentities decides what core and the RBAC manager run as. With
// Crossplane's Helm chart and kube-controller-manager (whose
// clusterrole-aggregation controller fills the chart's aggregated roles),
// they run as the chart's ServiceAccounts with the chart's ClusterRoles, as
// in a cluster; otherwise as the admin.
func (h *Harness) crossplaneIdentities(ctx context.Context) error {
	h.coreKubeconfig, h.rbacKubeconfig = h.kubeconfig, h.kubeconfig
	if h.tools.CrossplaneChart == "" || h.kcm == nil {
		h.log.Info("Crossplane core and its RBAC manager run with the admin kubeconfig: set CROSSPLANE_CHART and KUBE_CONTROLLER_MANAGER_BIN (bash hack/tools.sh env) for the Helm chart's ServiceAccounts and roles")
		return nil
	}
	t := time.Now()
	if err := h.applyChartRBAC(ctx); err != nil {
		return err
	}
	// kube-controller-manager aggregates the rules into the crossplane
	// ClusterRole; core cannot start before.
	err := wait.Poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		cr := &rbacv1.ClusterRole{}
		if err := h.kube.Get(ctx, types.NamespacedName{Name: coreServiceAccount}, cr); err != nil {
			return false, nil //nolint:nilerr // Keep waiting.
		}
		return len(cr.Rules) > 0, nil
	})
	if err != nil {
		return errors.Wrap(err, "cannot wait for kube-controller-manager to aggregate the crossplane ClusterRole")
	}
	if h.coreKubeconfig, err = h.serviceAccountKubeconfig(ctx, coreServiceAccount); err != nil {
		return err
	}
	if h.rbacKubeconfig, err = h.serviceAccountKubeconfig(ctx, rbacServiceAccount); err != nil {
		return err
	}
	h.log.Info("Crossplane core and its RBAC manager run as the Helm chart's ServiceAccounts", "duration", since(t), "core", coreServiceAccount, "rbac-manager", rbacServiceAccount)
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig with a token of the named
// ServiceAccount in Crossplane's namespace and returns its path.
func (h *Harness) serviceAccountKubeconfig(ctx context.Context, sa string) (string, error) {
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.opts.Namespace, Name: sa}}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenSeconds)}}
	if err := h.kube.SubResource("token").Create(ctx, acct, tr); err != nil {
		return "", errors.Wrapf(err, "cannot request a token for ServiceAccount %s", sa)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["harness"] = &clientcmdapi.Cluster{Server: h.cfg.Host, CertificateAuthorityData: h.cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[sa] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: sa}
	kc.CurrentContext = sa
	path := filepath.Join(h.dir, "kubeconfig-"+sa)
	return path, errors.Wrapf(clientcmd.WriteToFile(*kc, path), "cannot write the kubeconfig of ServiceAccount %s", sa)
}

// startRBACManager runs Crossplane's RBAC manager (`crossplane rbac start`):
// it renders a ClusterRole for each provider revision and binds it to the
// ServiceAccount of the revision's Deployment, which is all the provider's
// pods may do. It runs in a network namespace of its own, as in its pod:
// its metrics server binds :8080 on every interface and has no flag to move
// it. The kube-apiserver is forwarded into that namespace.
func (h *Harness) startRBACManager(ctx context.Context) error {
	t := time.Now()
	n, err := newPodNet("crossplane-rbac-manager")
	if err != nil {
		return err
	}
	u, err := url.Parse(h.cfg.Host)
	if err != nil {
		return errors.Wrap(err, "cannot parse the kube-apiserver's URL")
	}
	l, err := n.listen(u.Host)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.forwards = append(h.forwards, l)
	h.mu.Unlock()
	go forward(l, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", u.Host)
	})
	args := []string{"rbac", "start"}
	if h.opts.Debug {
		args = append(args, "--debug")
	}
	h.rbac = h.newProcess("crossplane-rbac-manager", Command{
		Path:    h.tools.Crossplane,
		Args:    args,
		Env:     []string{"LEADER_ELECTION=false", "KUBECONFIG=" + h.rbacKubeconfig},
		StartIn: func(start func() error) error { return n.do(start) },
	})
	if err := h.rbac.Start(); err != nil {
		return err
	}
	select {
	case <-h.rbac.Exited():
		return errors.Errorf("cannot start Crossplane's RBAC manager: it exited (%v): %s", h.rbac.Err(), tailFile(h.rbac.LogPath(), 5))
	case <-time.After(time.Second):
	case <-ctx.Done():
		return errors.Wrap(ctx.Err(), "cannot start Crossplane's RBAC manager")
	}
	h.log.Info("Crossplane RBAC manager running", "duration", since(t))
	return nil
}

// coreInit runs `crossplane core init`, retrying when it fails.
func (h *Harness) coreInit(ctx context.Context) error {
	args := []string{"core", "init"}
	for _, a := range h.opts.Activations {
		args = append(args, "--activation="+a)
	}
	env := append(os.Environ(),
		"KUBECONFIG="+h.coreKubeconfig,
		"POD_NAMESPACE="+h.opts.Namespace,
		"POD_SERVICE_ACCOUNT="+DefaultServiceAccount,
		"CRDS_PATH="+h.tools.CrossplaneCRDs,
		"WEBHOOK_CONFIGS_PATH="+h.tools.CrossplaneWebhookConfigs,
		"WEBHOOK_SERVICE_NAME="+WebhookService,
		"WEBHOOK_SERVICE_NAMESPACE="+h.opts.Namespace,
		"WEBHOOK_SERVICE_PORT="+strconv.Itoa(WebhookPort),
		"TLS_CA_SECRET_NAME="+RootCASecret,
		"TLS_SERVER_SECRET_NAME="+ServerTLSSecret,
		"TLS_CLIENT_SECRET_NAME="+ClientTLSSecret,
	)
	logPath := filepath.Join(h.dir, "logs", "crossplane-init.log")
	var last error
	for i := 1; i <= coreInitAttempts; i++ {
		c := exec.CommandContext(ctx, h.tools.Crossplane, args...) //nolint:gosec // The binary comes from Tools.
		c.Env = env
		c.Dir = h.dir
		c.SysProcAttr = proc.SysProcAttr()
		out, err := c.CombinedOutput()
		_ = appendFile(logPath, out)
		if err == nil {
			return nil
		}
		last = errors.Errorf("%v: %s", err, tail(out, 1))
		if ctx.Err() != nil {
			break
		}
		// The first run usually races the Lock CRD it has just applied.
		h.log.Info("crossplane core init failed; retrying", "attempt", i, "error", tail(out, 1))
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(i) * time.Second):
		}
	}
	return errors.Wrapf(last, "cannot run crossplane core init (log: %s)", logPath)
}

// waitCoreReady waits until core's health probe answers and its controllers
// have reconciled the default ManagedResourceActivationPolicy - proof that
// the manager started, its caches synced and it can write status.
func (h *Harness) waitCoreReady(ctx context.Context) error {
	exited := h.core.Exited()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-wctx.Done():
		}
	}()
	fail := func(err error, what string) error {
		select {
		case <-exited:
			return errors.Errorf("cannot start crossplane core: it exited (%v): %s", h.core.Err(), tailFile(h.core.LogPath(), 5))
		default:
			return errors.Wrapf(err, "cannot wait for crossplane core %s (log: %s)", what, h.core.LogPath())
		}
	}
	if err := waitHTTP(wctx, "http://127.0.0.1:"+strconv.Itoa(h.coreHealthPort)+"/readyz"); err != nil {
		return fail(err, "health probe")
	}
	if len(h.opts.Activations) == 0 {
		return nil
	}
	err := wait.Poll(wctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		p := &xpextv1alpha1.ManagedResourceActivationPolicy{}
		if err := h.kube.Get(ctx, types.NamespacedName{Name: "default"}, p); err != nil {
			return false, nil // Keep waiting.
		}
		return len(p.Status.Conditions) > 0, nil
	})
	if err != nil {
		return fail(err, "controllers")
	}
	return nil
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// tail returns the last n non-empty lines of out, joined with " | ".
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(out, nil))), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// tailFile returns the last n lines of a log file.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return tail(b, n)
}
