// Package kube starts a real kube-apiserver and etcd (controller-runtime's
// envtest, with the binaries hack/tools.sh builds) for tests: the one way
// this project starts an API server.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AssetsEnv names the environment variable that holds the directory of the
// kube-apiserver and etcd binaries (`eval "$(bash hack/tools.sh env)"` sets
// it).
const AssetsEnv = "KUBEBUILDER_ASSETS"

// ErrNoAssets is returned when no binaries are configured: callers skip.
var ErrNoAssets = errors.New(AssetsEnv + " is unset: run `make test` (or eval \"$(bash hack/tools.sh env)\") to get kube-apiserver and etcd")

// Options say what to start.
type Options struct {
	// Assets is the directory of the binaries; default $KUBEBUILDER_ASSETS.
	Assets string
	// CRDDirs are installed before Start returns; each must exist.
	CRDDirs []string
	// EtcdDataDir keeps etcd's data there; default a temporary directory.
	EtcdDataDir string
	// EtcdLog and APIServerLog receive the processes' output; default none.
	EtcdLog, APIServerLog io.Writer
	// Kubeconfig, when set, is where an admin kubeconfig is written, for
	// processes the test starts.
	Kubeconfig string
	// Scheme is the client's scheme; default client-go's.
	Scheme *runtime.Scheme
	// QPS and Burst of the client; default client-go's.
	QPS   float32
	Burst int
	// AuditPolicy and AuditLog, when both set, make kube-apiserver write an
	// audit log (JSON lines) of what the policy file selects.
	AuditPolicy, AuditLog string
	// CertDir, when set, holds kube-apiserver's serving and ServiceAccount
	// signing keys; a fixed directory lets Restart keep them (and every
	// token issued before).
	CertDir string
	// ServiceCIDR, when set, is kube-apiserver's
	// --service-cluster-ip-range: the range Services' ClusterIPs come from.
	ServiceCIDR string
	// ConversionScheme, when set, says which of CRDDirs' CRDs keep their
	// conversion webhook: those whose kinds it knows as convertible (a hub
	// and its spokes). Their webhook is pointed at a local address, with a
	// CA generated for it; the test serves it there (Env.ConversionWebhook).
	// The conversion of any other CRD is removed. Unset, CRDs are
	// installed as they are.
	ConversionScheme *runtime.Scheme
	// LoopbackJWKSURI makes kube-apiserver's OIDC discovery document
	// (/.well-known/openid-configuration) name its JWKS at
	// https://127.0.0.1:<port>/openid/v1/jwks
	// (--service-account-jwks-uri), which its serving certificate covers.
	// By default kube-apiserver names its advertise address, the host's
	// first non-loopback address, which the certificate does not cover.
	LoopbackJWKSURI bool
	// Address, when set, is where kube-apiserver listens and what it
	// advertises as the endpoint of the `kubernetes` Service: an address
	// that pods reach, such as a node's. Its serving certificate, made
	// here under CertDir (required) by a CA of its own (CertDir/ca.crt),
	// covers Address, loopback and the names and ClusterIP in-cluster
	// clients use (the first address of ServiceCIDR, required). It
	// reaches kubelets (logs, exec, port-forward) with a client
	// certificate of that CA in system:masters: kubelets trust
	// CertDir/ca.crt for clients.
	Address string
	// Pods prepares kube-apiserver for pods that a real kubelet runs: the
	// ServiceAccount admission plugin (envtest turns it off), and kubelets
	// reached by their InternalIP for logs and exec.
	Pods bool
	// APIServerArgs are more kube-apiserver flags, by name without the
	// dashes.
	APIServerArgs map[string]string
}

// A WebhookServer is where kube-apiserver expects the conversion webhook
// that a test serves: an HTTPS server on Host:Port with the certificate and
// key in CertDir (tls.crt, tls.key).
type WebhookServer struct {
	Host    string
	Port    int
	CertDir string
}

// An Env is a running kube-apiserver and etcd, and an admin client.
type Env struct {
	// Config is an admin's (system:masters) REST config.
	Config *rest.Config
	// Client uses Config.
	Client client.Client
	env    *envtest.Environment
}

// Start starts etcd and kube-apiserver and waits until they serve.
func Start(o Options) (*Env, error) {
	if o.Assets == "" {
		o.Assets = os.Getenv(AssetsEnv)
	}
	if o.Assets == "" {
		return nil, ErrNoAssets
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    o.Assets,
		CRDDirectoryPaths:        o.CRDDirs,
		ErrorIfCRDPathMissing:    len(o.CRDDirs) > 0,
		ControlPlaneStartTimeout: 2 * time.Minute,
		// kube-apiserver drains for half a minute after SIGTERM; nothing
		// here needs that, and etcd is crash safe: 5s, then SIGKILL.
		ControlPlaneStopTimeout: 5 * time.Second,
	}
	if o.ConversionScheme != nil {
		env.CRDInstallOptions.Scheme = o.ConversionScheme
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: o.EtcdDataDir, Out: o.EtcdLog, Err: o.EtcdLog}
	env.ControlPlane.APIServer = &envtest.APIServer{Out: o.APIServerLog, Err: o.APIServerLog, CertDir: o.CertDir}
	if o.AuditPolicy != "" && o.AuditLog != "" {
		args := env.ControlPlane.APIServer.Configure()
		args.Set("audit-policy-file", o.AuditPolicy)
		args.Set("audit-log-path", o.AuditLog)
		args.Set("audit-log-format", "json")
		args.Set("audit-log-mode", "blocking")
	}
	if o.ServiceCIDR != "" {
		env.ControlPlane.APIServer.Configure().Set("service-cluster-ip-range", o.ServiceCIDR)
	}
	for k, v := range o.APIServerArgs {
		env.ControlPlane.APIServer.Configure().Set(k, v)
	}
	if o.LoopbackJWKSURI {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		env.ControlPlane.APIServer.ListenAddr = envtest.ListenAddr{Address: "127.0.0.1", Port: port}
		env.ControlPlane.APIServer.Configure().Set("service-account-jwks-uri", "https://127.0.0.1:"+port+"/openid/v1/jwks")
	}
	if o.CertDir != "" {
		if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
			return nil, fmt.Errorf("cannot create kube-apiserver's certificate directory: %w", err)
		}
	}
	if o.Address != "" {
		if err := serveAt(env.ControlPlane.APIServer, o); err != nil {
			return nil, err
		}
	}
	if o.Pods {
		args := env.ControlPlane.APIServer.Configure()
		args.Disable("disable-admission-plugins")
		args.Set("kubelet-preferred-address-types", "InternalIP")
	}
	if o.EtcdDataDir != "" {
		if err := os.MkdirAll(o.EtcdDataDir, 0o700); err != nil {
			return nil, fmt.Errorf("cannot create etcd data directory: %w", err)
		}
	}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("cannot start etcd and kube-apiserver: %w", err)
	}
	e := &Env{env: env}
	if err := e.admin(o); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return e, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // ctx-free by design: Listen's context only bounds resolving the address, and callers pass a literal IP
	if err != nil {
		return "", fmt.Errorf("cannot find a free port: %w", err)
	}
	defer l.Close()                                        //nolint:errcheck // only its port was wanted
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil //nolint:forcetypeassert // a TCP listener
}

func (e *Env) admin(o Options) error {
	admin, err := e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("cannot provision an admin user: %w", err)
	}
	if o.Kubeconfig != "" {
		kc, err := admin.KubeConfig()
		if err != nil {
			return fmt.Errorf("cannot render the admin kubeconfig: %w", err)
		}
		if err := os.WriteFile(o.Kubeconfig, kc, 0o600); err != nil {
			return fmt.Errorf("cannot write the admin kubeconfig: %w", err)
		}
	}
	e.Config = rest.CopyConfig(admin.Config())
	if o.QPS > 0 {
		e.Config.QPS, e.Config.Burst = o.QPS, o.Burst
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: o.Scheme}); err != nil {
		return fmt.Errorf("cannot create a Kubernetes client: %w", err)
	}
	return nil
}

// ConversionWebhook is where kube-apiserver calls the conversion webhook of
// the CRDs Options.ConversionScheme kept it for.
func (e *Env) ConversionWebhook() WebhookServer {
	wo := e.env.WebhookInstallOptions
	return WebhookServer{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir}
}

// StopAPIServer stops kube-apiserver, leaving etcd running: SIGTERM, and
// SIGKILL if it is still draining (its clients' watches) after the stop
// timeout of 5s. It returns once the port refuses connections.
func (e *Env) StopAPIServer() error {
	err := e.env.ControlPlane.APIServer.Stop()
	if err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return err
	}
	addr := e.env.ControlPlane.APIServer.ListenAddr
	hostPort := net.JoinHostPort(addr.Address, addr.Port)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, derr := (&net.Dialer{Timeout: time.Second}).DialContext(context.Background(), "tcp", hostPort)
		if derr != nil {
			return nil //nolint:nilerr // a refused connection is what this waits for: kube-apiserver is down
		}
		_ = c.Close()
	}
	return fmt.Errorf("kube-apiserver still accepts connections on %s 10s after it was killed", hostPort)
}

// StartAPIServer starts kube-apiserver again, on the same address and,
// with Options.CertDir, with the same certificates and signing keys, and
// waits until it serves.
func (e *Env) StartAPIServer() error { return e.env.ControlPlane.APIServer.Start() }

// Stop stops kube-apiserver and etcd.
func (e *Env) Stop() error { return e.env.Stop() }
