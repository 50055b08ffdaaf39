// Package harness runs a local Crossplane control plane for the end-to-end
// tests and `make demo`: etcd and kube-apiserver (controller-runtime's
// envtest, with an audit log), Crossplane core v2.4.2 with its Deployment
// package runtime, its webhooks (as the Helm chart runs it) and its RBAC
// manager, a loopback OCI registry, optionally kube-controller-manager
// (garbage collection) and the reference Widget API server. It installs
// Function and Provider packages through Crossplane's own package manager
// and plays the node that runs the Deployments Crossplane creates for them:
// pods from the packages' images, chrooted, as the user, with the
// environment, volumes, ServiceAccount token and probes of the pod
// template, each in a network namespace of its own, and Services on their
// ClusterIPs - including the chart's crossplane-webhooks Service, forwarded
// to core (see the README for what still differs from a cluster).
//
// Everything listens on loopback addresses - except Crossplane core's
// metrics, health-probe and webhook servers: core has flags for their ports
// but binds them on all interfaces - and everything lives under one
// directory. Stop, cancelling the context given to Start, or (with
// Options.HandleSignals) SIGINT/SIGTERM tear it all down, leaving no process
// behind. The processes the harness starts itself also die with the
// harness's process (Linux parent-death signal); etcd and kube-apiserver,
// which envtest starts, do not, so a harness killed with SIGKILL leaks those
// two.
//
// A typical use:
//
//	h, err := harness.Start(ctx, harness.Options{Dir: t.TempDir(), Log: log})
//	if err != nil { ... }
//	defer h.Stop()
//	ref, err := h.PushPackage(ctx, "_output/xpkg/function-widget-v0.1.0-amd64.xpkg", "widgetco/function-widget:v0.1.0")
//	fn, err := h.InstallFunction(ctx, "function-widget", ref, harness.InstallOptions{})
//	// ... kubectl --kubeconfig h.Kubeconfig() ..., h.Client() ...
//	if failed { dir, _ := h.DumpDiagnostics(ctx, "") }
package harness

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/audit"
	"github.com/widgetco/crossplane-widget/test/lib/diagnostics"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/registry"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// Defaults for Options.
const (
	DefaultNamespace      = "crossplane-system"
	DefaultServiceAccount = "crossplane"
	DefaultStartTimeout   = 5 * time.Minute
)

// Options configure Start. The zero value is usable apart from needing the
// tools in the environment.
type Options struct {
	// Dir holds everything the harness writes: the admin kubeconfig, etcd's
	// data, package caches, TLS material, process logs (logs/) and
	// diagnostics. Default: a new temporary directory, kept after Stop so
	// logs can be read.
	Dir string

	// Log receives progress (with durations) and problems. Default: discard.
	Log *slog.Logger

	// Tools are the binaries to run. Default: ToolsFromEnv.
	Tools *Tools

	// Namespace is Crossplane's namespace (default crossplane-system).
	Namespace string

	// Activations are the default ManagedResourceActivationPolicy entries
	// `crossplane core init` creates (default ["*"], like the Helm chart).
	// They activate the MRDs of providers with the safe-start capability;
	// Crossplane creates the MRDs of other providers active already.
	Activations []string

	// CoreArgs are extra flags for `crossplane core start`, e.g.
	// "--enable-operations" or "--poll-interval=10s".
	CoreArgs []string

	// Debug runs Crossplane core with --debug (its log is in logs/).
	Debug bool

	// WidgetAPI, when set, runs the reference Widget API server in-process on
	// a loopback port. DataDir defaults to <Dir>/widgetapi and Logger to
	// <Dir>/logs/widget-api.log.
	WidgetAPI *server.Options

	// WidgetAPIIdentity, with WidgetAPI, makes the Widget API also accept
	// ServiceAccount tokens kube-apiserver issues (see ClusterIdentity);
	// it overrides WidgetAPI.IdentityTokens.
	WidgetAPIIdentity *ClusterIdentity

	// ProjectedTokenRefresh, when positive, makes the node refresh the
	// ServiceAccount tokens of projected volumes at least this often. By
	// default it refreshes them as a kubelet does, after 80% of their
	// lifetime or 24 hours; kube-apiserver issues none shorter than ten
	// minutes, so a test that wants rotation sooner sets this.
	ProjectedTokenRefresh time.Duration

	// HandleSignals tears the harness down on SIGINT or SIGTERM (for the
	// demo). Done is closed when that is finished. Further signals are
	// ignored until then, so an impatient second Ctrl-C cannot leave etcd
	// or kube-apiserver behind.
	HandleSignals bool

	// StartTimeout bounds Start (default 5m). Waits in InstallFunction and
	// InstallProvider are bounded by their context and by the same timeout.
	StartTimeout time.Duration
}

// A Harness is a running local control plane. Create it with Start; call Stop
// when done. Its methods are safe for concurrent use.
type Harness struct {
	// Log is kube-apiserver's audit log: what the packages asked for and
	// what RBAC refused them (Forbidden, Requests, WritesIn, EventCreates,
	// Writes).
	*audit.Log

	opts  Options
	tools Tools
	log   *slog.Logger
	dir   string

	env        *kube.Env
	cfg        *rest.Config
	kubeconfig string
	kube       client.Client
	// What core and the RBAC manager run with (see crossplaneIdentities).
	coreKubeconfig, rbacKubeconfig string

	registry *registry.Registry
	widgets  *WidgetAPI
	issuer   string
	kcm      *Process
	core     *Process

	coreMetricsPort int
	coreHealthPort  int
	coreWebhookPort int
	logFiles        []*os.File

	node *node
	rbac *Process

	mu       sync.Mutex
	forwards []net.Listener

	stopOnce sync.Once
	stopErr  error
	done     chan struct{}
	cancel   context.CancelFunc
}

// Start brings up the control plane and returns when Crossplane core is
// ready to install packages. ctx bounds the harness's whole life, not just
// start-up: cancelling it tears everything down (as Stop does). On error
// everything started so far is stopped; the error names the diagnostics
// directory when there is one.
func Start(ctx context.Context, o Options) (*Harness, error) { // A linear sequence of start-up steps.
	begin := time.Now()
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Activations == nil {
		o.Activations = []string{"*"}
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	var t Tools
	if o.Tools != nil {
		t = *o.Tools
	} else {
		var err error
		if t, err = ToolsFromEnv(); err != nil {
			return nil, err
		}
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "crossplane-harness-")
		if err != nil {
			return nil, errors.Wrap(err, "cannot create harness directory")
		}
		o.Dir = d
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, errors.Wrap(err, "cannot resolve harness directory")
	}
	for _, d := range []string{"logs", "cache/xpkg", "cache/xfn", "tls", "runtimes"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, errors.Wrap(err, "cannot create harness directory")
		}
	}

	var lifeCtx context.Context
	var cancel context.CancelFunc
	if o.HandleSignals {
		lifeCtx, cancel = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	} else {
		lifeCtx, cancel = context.WithCancel(ctx)
	}
	h := &Harness{
		opts:   o,
		tools:  t,
		log:    o.Log,
		dir:    dir,
		Log:    &audit.Log{Path: filepath.Join(dir, "logs", "kube-apiserver-audit.log")},
		done:   make(chan struct{}),
		cancel: cancel,
	}
	h.log.Info("Starting local control plane", "dir", dir)

	startCtx, startCancel := context.WithTimeout(lifeCtx, o.StartTimeout)
	defer startCancel()
	if err := h.start(startCtx); err != nil {
		if ctx.Err() == nil && h.kube != nil {
			if d, derr := h.DumpDiagnostics(context.Background(), ""); derr == nil {
				err = errors.Wrapf(err, "diagnostics in %s", d)
			}
		}
		_ = h.Stop()
		return nil, err
	}
	h.node.start(lifeCtx)
	go func() {
		<-lifeCtx.Done()
		_ = h.Stop()
	}()
	h.log.Info("Local control plane ready", "duration", since(begin), "kubeconfig", h.kubeconfig)
	return h, nil
}

func (h *Harness) start(ctx context.Context) error {
	if err := h.startControlPlane(ctx); err != nil {
		return err
	}
	if h.tools.KubeControllerManager != "" {
		if err := h.startControllerManager(ctx); err != nil {
			return err
		}
	}
	reg, err := registry.Start("127.0.0.1:0", filepath.Join(h.dir, "logs", "registry.log"))
	if err != nil {
		return err
	}
	h.registry = reg
	h.log.Info("Loopback OCI registry ready", "host", reg.Host)
	if h.opts.WidgetAPI != nil {
		o := *h.opts.WidgetAPI
		if h.opts.WidgetAPIIdentity != nil {
			if o.IdentityTokens, err = h.trustCluster(ctx, *h.opts.WidgetAPIIdentity); err != nil {
				return err
			}
		}
		w, err := StartWidgetAPI(o, h.dir, "127.0.0.1:0")
		if err != nil {
			return err
		}
		h.widgets = w
		h.log.Info("Widget API ready", "url", w.URL, "data-dir", w.DataDir)
	}
	if err := h.startNode(); err != nil {
		return err
	}
	if err := h.startCrossplane(ctx); err != nil {
		return err
	}
	if err := h.CreateRegistryPullSecret(ctx, LoopbackPullSecret); err != nil {
		return err
	}
	return h.startRBACManager(ctx)
}

// ServiceCIDR is the range of Services' ClusterIPs: loopback addresses, so
// that the node listens for each Service on its ClusterIP, where
// kube-apiserver finds it too - as a cluster's API server reaches a webhook
// Service (a CRD's conversion webhook, say) by its ClusterIP.
const ServiceCIDR = "127.96.0.0/16"

// startControlPlane starts etcd and kube-apiserver and writes the admin
// kubeconfig.
func (h *Harness) startControlPlane(_ context.Context) error {
	t := time.Now()
	etcdLog, err := h.openLog("etcd")
	if err != nil {
		return err
	}
	apiLog, err := h.openLog("kube-apiserver")
	if err != nil {
		return err
	}
	h.kubeconfig = filepath.Join(h.dir, "kubeconfig")
	policyFile := filepath.Join(h.dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(audit.Policy()), 0o600); err != nil {
		return errors.Wrap(err, "cannot write kube-apiserver's audit policy")
	}
	env, err := kube.Start(kube.Options{
		Assets:       h.tools.KubebuilderAssets,
		EtcdDataDir:  filepath.Join(h.dir, "etcd"),
		EtcdLog:      etcdLog,
		APIServerLog: apiLog,
		Kubeconfig:   h.kubeconfig,
		Scheme:       kube.CrossplaneScheme(),
		QPS:          50,
		Burst:        100,
		AuditPolicy:  policyFile,
		AuditLog:     h.Path,
		CertDir:      filepath.Join(h.dir, "kube-apiserver"),
		ServiceCIDR:  ServiceCIDR,
		// The Widget API fetches the issuer's keys from the URL discovery
		// names; by default that is an address the certificate lacks.
		LoopbackJWKSURI: h.opts.WidgetAPIIdentity != nil,
	})
	if err != nil {
		return err
	}
	h.env, h.cfg, h.kube = env, env.Config, env.Client
	h.log.Info("kube-apiserver ready", "duration", since(t), "url", h.cfg.Host)
	return nil
}

// openLog opens logs/<name>.log for appending; Stop closes it.
func (h *Harness) openLog(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(h.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot open %s log", name)
	}
	h.logFiles = append(h.logFiles, f)
	return f, nil
}

// startControllerManager runs kube-controller-manager with only the
// controllers envtest lacks that Crossplane relies on: the garbage collector
// (composed resources, package revisions and MRDs are deleted through
// ownerReferences), the namespace controller, and ClusterRole aggregation
// (Crossplane's roles, and those the RBAC manager creates for providers and
// XRDs, aggregate into crossplane, crossplane-admin, -edit and -view).
func (h *Harness) startControllerManager(ctx context.Context) error {
	t := time.Now()
	p := h.newProcess("kube-controller-manager", Command{
		Path: h.tools.KubeControllerManager,
		Args: []string{
			"--kubeconfig=" + h.kubeconfig,
			"--controllers=garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller",
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
			"--concurrent-gc-syncs=5",
		},
	})
	if err := p.Start(); err != nil {
		return err
	}
	h.kcm = p
	// It has no serving port (--secure-port=0); give it a moment and make
	// sure it did not exit on a bad flag.
	select {
	case <-p.Exited():
		return errors.Errorf("cannot start kube-controller-manager: it exited (%v); see %s", p.Err(), p.LogPath())
	case <-time.After(time.Second):
	case <-ctx.Done():
		return errors.Wrap(ctx.Err(), "cannot start kube-controller-manager")
	}
	h.log.Info("kube-controller-manager running", "duration", since(t), "controllers", "garbage-collector,namespace,clusterrole-aggregation")
	return nil
}

// startNode creates the node that runs the pods of Crossplane's Deployment
// runtime (see node), and the hosts file it keeps for core.
func (h *Harness) startNode() error {
	u, err := url.Parse(h.cfg.Host)
	if err != nil {
		return errors.Wrap(err, "cannot parse the kube-apiserver's URL")
	}
	var hostPorts []string
	if h.widgets != nil {
		w, err := url.Parse(h.widgets.URL)
		if err != nil {
			return errors.Wrap(err, "cannot parse the Widget API's URL")
		}
		hostPorts = append(hostPorts, w.Host)
	}
	e := &podEnv{
		kube:      h.kube,
		namespace: h.opts.Namespace,
		apiHost:   u.Hostname(),
		apiPort:   u.Port(),
		apiCA:     h.cfg.CAData,
		hostPorts: hostPorts,
		images:    newImages(filepath.Join(h.dir, "images"), h.registry.Host),
		dir:       h.dir,
		log:       h.log.With("component", "node"),

		tokenRefresh: h.opts.ProjectedTokenRefresh,
		tokens:       &tokenLedger{},
	}
	h.node, err = newNode(e, filepath.Join(h.dir, "hosts"))
	return err
}

// newProcess returns a Process logging to logs/<name>.log with the harness's
// environment: KUBECONFIG and POD_NAMESPACE point at this control plane.
func (h *Harness) newProcess(name string, c Command) *Process {
	if c.Dir == "" {
		c.Dir = h.dir
	}
	env := append(os.Environ(),
		"KUBECONFIG="+h.kubeconfig,
		"POD_NAMESPACE="+h.opts.Namespace,
		"POD_SERVICE_ACCOUNT="+DefaultServiceAccount,
	)
	env = append(env, c.Env...)
	return proc.New(name, c, env, filepath.Join(h.dir, "logs", name+".log"), h.log)
}

// Stop tears everything down: package runtimes, Crossplane core,
// kube-controller-manager, the registry, the Widget API server, then
// kube-apiserver and etcd. It waits for every process to exit. It is safe to
// call more than once and concurrently; later calls return the first call's
// result once it is complete. The harness directory is left in place.
func (h *Harness) Stop() error {
	h.stopOnce.Do(func() {
		t := time.Now()
		h.log.Info("Tearing down local control plane")
		// Cancel last: with HandleSignals that also stops catching SIGINT,
		// and a second Ctrl-C during teardown must not kill the harness
		// before etcd and kube-apiserver are stopped.
		defer h.cancel()
		var errs []error
		if h.node != nil {
			errs = append(errs, h.node.stop())
		}
		h.mu.Lock()
		for _, l := range h.forwards {
			_ = l.Close()
		}
		h.mu.Unlock()
		for _, p := range []*Process{h.core, h.rbac, h.kcm} {
			if p != nil {
				errs = append(errs, p.Stop())
			}
		}
		if h.registry != nil {
			errs = append(errs, h.registry.Close())
		}
		if h.widgets != nil {
			errs = append(errs, h.widgets.Close())
		}
		if h.env != nil {
			errs = append(errs, errors.Wrap(h.env.Stop(), "cannot stop etcd and kube-apiserver"))
		}
		for _, f := range h.logFiles {
			_ = f.Close()
		}
		if err := errors.Join(errs...); err != nil {
			h.stopErr = err
		}
		h.log.Info("Local control plane torn down", "duration", since(t))
		close(h.done)
	})
	<-h.done
	return h.stopErr
}

// Done is closed when the harness has been torn down (by Stop, by its context
// or by a signal).
func (h *Harness) Done() <-chan struct{} { return h.done }

// Dir is the harness directory.
func (h *Harness) Dir() string { return h.dir }

// Kubeconfig is the path of an admin (system:masters) kubeconfig for the API
// server.
func (h *Harness) Kubeconfig() string { return h.kubeconfig }

// RESTConfig returns a copy of the admin REST config.
func (h *Harness) RESTConfig() *rest.Config { return rest.CopyConfig(h.cfg) }

// Client is an uncached admin client whose scheme knows core Kubernetes
// types, CRDs and Crossplane's package and MRD types. Use unstructured
// objects for anything else.
func (h *Harness) Client() client.Client { return h.kube }

// Namespace is Crossplane's namespace.
func (h *Harness) Namespace() string { return h.opts.Namespace }

// Core is the Crossplane core process (to read its log, or kill and restart
// it in a test).
func (h *Harness) Core() *Process { return h.core }

// CoreMetricsURL is Crossplane core's Prometheus endpoint, e.g. to check
// function_run_function_response_total.
func (h *Harness) CoreMetricsURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(h.coreMetricsPort)) + "/metrics"
}

// WidgetAPI is the reference Widget API server, or nil when
// Options.WidgetAPI was not set.
func (h *Harness) WidgetAPI() *WidgetAPI { return h.widgets }

// since is the time since t, rounded for logs.
func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	return wait.Poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		rsp, err := c.Do(req)
		if err != nil {
			return false, nil // Not up yet.
		}
		_ = rsp.Body.Close()
		return rsp.StatusCode == http.StatusOK, nil
	})
}

// apiStartGrace is how long after kube-apiserver reports healthy again
// Forbidden still counts a refused request as refused while starting.
const apiStartGrace = 5 * time.Second

// StopAPIServer stops kube-apiserver (etcd keeps running), as a control
// plane upgrade or crash would: every client of the control plane - core,
// the RBAC manager, the packages' pods, the node - loses it until
// StartAPIServer.
// kube-apiserver gets 5s to drain after SIGTERM; then it is killed, which is
// a fine way for an API server to go too.
func (h *Harness) StopAPIServer() error {
	t := time.Now()
	h.log.Info("Stopping kube-apiserver")
	if err := h.env.StopAPIServer(); err != nil {
		if !strings.Contains(err.Error(), "timeout waiting") {
			return errors.Wrap(err, "cannot stop kube-apiserver")
		}
		h.log.Info("kube-apiserver did not stop in time after SIGTERM and was killed")
	}
	u, err := url.Parse(h.cfg.Host)
	if err != nil {
		return errors.Wrap(err, "cannot parse the kube-apiserver's URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = wait.Poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return true, nil
		}
		_ = c.Close()
		return false, nil
	})
	if err != nil {
		return errors.Wrap(err, "kube-apiserver still accepts connections")
	}
	h.log.Info("kube-apiserver stopped", "duration", since(t))
	return nil
}

// StartAPIServer starts kube-apiserver again on the same address, with the
// same certificates and ServiceAccount signing keys, and returns once it
// serves.
func (h *Harness) StartAPIServer() error {
	t := time.Now()
	err := h.env.StartAPIServer()
	h.APIServerStarting(t, time.Now().Add(apiStartGrace))
	if err != nil {
		return errors.Wrap(err, "cannot start kube-apiserver again")
	}
	h.log.Info("kube-apiserver serves again", "duration", since(t))
	return nil
}

// DumpDiagnostics writes what is needed to debug a failure into dir
// (default: a new timestamped directory under <Dir>/diagnostics) and
// returns the directory; see diagnostics.Dump.
func (h *Harness) DumpDiagnostics(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		dir = filepath.Join(h.dir, "diagnostics", time.Now().Format("20060102-150405.000"))
	}
	src := diagnostics.Source{Config: h.cfg, Audit: h.Log, Logs: []string{filepath.Join(h.dir, "logs")}}
	if h.kube != nil {
		src.Client = h.kube
	}
	if h.node != nil {
		src.Pods = func(context.Context) string { return h.node.describe() }
	}
	return diagnostics.Dump(ctx, src, dir)
}
