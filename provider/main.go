// Command provider-widget is a Crossplane provider that manages Widgets in
// the Widget API as Kubernetes managed resources.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/alecthomas/kong"
	"github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/customresourcesgate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/widgetco/crossplane-widget/apis"
	"github.com/widgetco/crossplane-widget/provider/internal/cachetrim"
	"github.com/widgetco/crossplane-widget/provider/internal/changelog"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	widgetcontroller "github.com/widgetco/crossplane-widget/provider/internal/controller"
	"github.com/widgetco/crossplane-widget/provider/internal/conversionwebhook"
	"github.com/widgetco/crossplane-widget/provider/internal/feed"
	widgetmetrics "github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// version is stamped by the build (-X main.version).
var version = "dev"

// cli is the provider's command line. Environment variables are what
// Crossplane's package runtime sets.
type cli struct {
	Version kong.VersionFlag `help:"Print the version and exit."`

	Debug      bool   `short:"d" help:"Log at debug level (never logs tokens or key secrets)."`
	Kubeconfig string `type:"path" env:"KUBECONFIG" help:"Kubeconfig to use outside a cluster. Default: the in-cluster config."`

	PollInterval     time.Duration `default:"10m" help:"How often each managed resource is checked for drift when nothing else triggers a reconcile. The change feed repairs out-of-band changes within seconds; polling is the safety net."`
	PollJitter       time.Duration `default:"0s" help:"Random spread added to each poll, up to this much either way and at most a tenth of the resource's own interval (0: a tenth of the poll interval)."`
	MinPollInterval  time.Duration `default:"10s" help:"Shortest poll interval a managed resource may ask for with the crossplane.io/poll-interval annotation; shorter values get this. At most --poll-interval. The default is the poll of a resource that is not Ready: an annotation cannot make the provider poll more often than it does by itself."`
	MaxReconcileRate int           `default:"50" env:"MAX_RECONCILE_RATE" help:"Most reconciles per second, across all controllers. Also the number of concurrent reconciles per controller. The Widget API is protected separately (the provider backs off on 429s); this bounds the provider's own CPU and kube-apiserver load."`
	SyncInterval     time.Duration `default:"1h" help:"How often the informer cache is fully resynced."`

	ChangeFeed           bool          `default:"true" negatable:"" help:"Follow the Widget API change feed to repair out-of-band changes within seconds (--no-change-feed relies on polling only)."`
	FeedWait             time.Duration `default:"30s" help:"Long-poll duration of change feed requests."`
	MaxFeeds             int           `default:"256" help:"Most Widget API change feeds followed at once (one per distinct endpoint, token and CA bundle). Resources of connections beyond it are repaired by polling."`
	MaxFeedsPerNamespace int           `default:"8" help:"Most change feeds followed for the ProviderConfigs of one namespace (ClusterProviderConfigs count only towards --max-feeds)."`

	ControlPlane string `env:"CONTROL_PLANE" help:"Name of the control plane this provider runs in, written on every widget and key it creates (label widgetco.io/control-plane). A provider writes only to widgets of its own control plane: a restored or migrated control plane that runs beside the original reports each widget the other manages, and never fights over it (docs/restore.md). Default: the name kept in ConfigMap widget-control-plane of the provider's namespace, made once at random; none outside a cluster."`

	EnableManagementPolicies bool `default:"true" negatable:"" env:"ENABLE_MANAGEMENT_POLICIES" help:"Honour spec.managementPolicies (e.g. Observe-only import)."`
	SafeStart                bool `default:"true" negatable:"" help:"Start each managed resource controller only once its CRD exists (Crossplane v2 safe-start: CRDs appear when activated)."`

	LeaderElection          bool          `env:"LEADER_ELECTION" help:"Use leader election so only one replica reconciles."`
	LeaderElectionNamespace string        `env:"POD_NAMESPACE" help:"Namespace of the leader election lease (default: the in-cluster namespace)."`
	LeaseDuration           time.Duration `default:"60s" help:"How long a standby replica waits after the leader's last renewal before it takes over. A killed leader is replaced within this."`
	RenewDeadline           time.Duration `default:"50s" help:"How long the leader keeps trying to renew its lease before it gives up leading (and exits). Must be less than --lease-duration."`
	RetryPeriod             time.Duration `default:"2s" help:"How often replicas try to acquire or renew the lease."`

	MetricsBindAddress     string `default:":8080" help:"Address of the Prometheus /metrics endpoint ('0' disables it)."`
	HealthProbeBindAddress string `default:":8081" help:"Address of /healthz and /readyz ('0' disables them)."`
	PprofBindAddress       string `default:"0" help:"Address of Go's /debug/pprof endpoints, for profiling memory and CPU ('0', the default, disables them; never expose them outside the pod)."`

	TokenFileDir     string `default:"/var/run/secrets/widgetco.io" help:"The only directory a cluster-scoped ProviderConfig or ClusterProviderConfig with credentials source Filesystem may name a token file in (e.g. a projected ServiceAccount token for the Widget API's audience). Files elsewhere, such as the provider's own Kubernetes token, are refused."`
	EnableChangeLogs bool   `name:"enable-changelogs" env:"ENABLE_CHANGELOGS" help:"Send an entry for every create, update and delete of a widget or key (the resource before the change, the operation, the drift repaired) to the change logs sidecar (alpha; see docs/runtime.md#change-logs). A missing or slow sidecar never holds up a reconcile: entries are dropped and counted."`
	ChangeLogsSocket string `name:"changelogs-socket" default:"${changelogs_socket}" help:"Unix socket of the change logs sidecar, on a volume shared with it."`

	APIRetries              int           `default:"4" help:"Attempts per idempotent Widget API request (retried on 5xx and transport errors, with backoff)."`
	RefusedTokenPause       time.Duration `default:"10s" help:"After the Widget API refuses a token (401, or 403 for an unmapped identity), send nothing with that token for this long, doubling up to 5m, until the token changes: refused attempts get the provider's address throttled for every tenant (docs/tenancy.md). At least 1s."`
	RefusedCredentialBurst  int           `default:"3" help:"Attempts with credentials the Widget API has not accepted yet (a new token, the one attempt after a pause) that the ProviderConfigs of one namespace - or the cluster scope - may make at once; only refused ones are kept. Then one per --refused-credential-refill. Credentials known to be accepted are never held back. Keep the sum over the namespaces that may try bad tokens under the Widget API's --failed-auth-burst (docs/tenancy.md). 0 disables the budget."`
	RefusedCredentialRefill time.Duration `default:"1m" help:"How often one namespace's (or the cluster scope's) budget of attempts with credentials not accepted yet gets one back (see --refused-credential-burst)."`

	WebhookTLSCertDir string `env:"WEBHOOK_TLS_CERT_DIR" help:"Directory of the conversion webhook's TLS certificate (tls.crt, tls.key), which Crossplane's package runtime mounts and names here. When empty the webhook server is off, and only v1beta1, the storage version, can be used."`
	WebhookPort       int    `default:"9443" help:"Port of the conversion webhook server: the port of the Service Crossplane creates for the provider."`
	// The webhook's other bounds are conversionwebhook.DefaultLimits and the
	// constants of conversionwebhook.NewServer.
	WebhookMaxRequestBytes int64 `default:"4194304" help:"Largest conversion request body the webhook reads (4 MiB: etcd stores objects up to 1.5 MiB by default). Raise it with etcd's --max-request-bytes."`

	// Flags of test builds only (testhooks.go); empty in the packages.
	testHooks `embed:""`
}

func main() {
	c := &cli{}
	kctx := kong.Parse(c,
		kong.Name("provider-widget"),
		kong.Description("A Crossplane provider that manages Widgets in the Widget API: Widget and WidgetKey managed resources (namespaced widget.m.widgetco.io and cluster-scoped widget.widgetco.io), ProviderConfigs with tokens from Secrets, adoption of existing widgets, drift repair driven by the API's change feed."),
		kong.UsageOnError(),
		kong.Vars{"version": version, "changelogs_socket": changelog.DefaultSocket})
	kctx.FatalIfErrorf(run(c))
}

// gcPercent is the garbage collector's target heap growth unless GOGC is
// set: 50 instead of Go's 100 keeps the provider within 150 MiB of memory
// with 10,000 Widgets managed, for about a quarter more CPU while it
// creates them (docs/benchmarks.md).
const gcPercent = 50

// deps are what the controllers share: Widget API sessions, metrics, event
// recorders, the change feed and the control plane's name.
func (c *cli) deps(mgr ctrl.Manager, own *widgetmetrics.Metrics, log logging.Logger) (mrsetup.Deps, error) {
	jitter := c.PollJitter
	if jitter == 0 {
		jitter = c.PollInterval / 10
	}
	throttle := clients.NewThrottle()
	resolver := clients.NewResolver(mgr.GetClient(),
		clients.WithThrottle(throttle),
		clients.WithPauses(clients.NewPauses(c.RefusedTokenPause, clients.DefaultMaxPause,
			clients.WithOwnerBudget(c.RefusedCredentialBurst, c.RefusedCredentialRefill))),
		clients.WithUserAgent("provider-widget/"+version),
		clients.WithObserver(own.ObserveAPI),
		clients.WithRetryPolicy(retryPolicy(c.APIRetries)),
		clients.WithTokenFileDir(c.TokenFileDir))
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return mrsetup.Deps{}, fmt.Errorf("cannot create a Kubernetes client for events: %w", err)
	}
	recorders := mrsetup.NewEventRecorders(cs.CoreV1(), mgr.GetScheme(), log.WithValues("component", "events"))
	if err := mgr.Add(recorders); err != nil {
		return mrsetup.Deps{}, fmt.Errorf("cannot add the event recorders: %w", err)
	}
	cp, err := controlPlaneName(context.Background(), cs.CoreV1(), c.LeaderElectionNamespace, c.ControlPlane)
	if err != nil {
		return mrsetup.Deps{}, err
	}
	logControlPlane(log, cp)
	recent := clients.NewRecentWidgets(c.PollInterval)
	d := mrsetup.Deps{
		Sessions:   &clients.Sessions{Resolver: resolver, Throttle: throttle, Recent: recent},
		Metrics:    own,
		PollJitter: jitter,
		Recorders:  recorders,
		// The floor of the crossplane.io/poll-interval annotation.
		MinPollInterval: c.MinPollInterval,
		ControlPlane:    cp,
	}
	c.applyTo(&d, log)
	if c.ChangeFeed {
		fm := feed.NewManager(log.WithValues("component", "change-feed"), own,
			feed.WithWait(c.FeedWait), feed.WithIdleTimeout(max(3*c.PollInterval, 15*time.Minute)), feed.WithRecentWidgets(recent),
			// Reconciles the feeds request, in all, are bounded like
			// the controllers' own, shared in turns between namespaces.
			feed.WithMaxFollowers(c.MaxFeeds, c.MaxFeedsPerNamespace), feed.WithRequeueRate(float64(c.MaxReconcileRate)))
		if err := mgr.Add(fm); err != nil {
			return mrsetup.Deps{}, fmt.Errorf("cannot add the change feed manager: %w", err)
		}
		d.Feed = fm
		d.Sessions.Feeds = fm
		d.Sessions.Recheck = mrsetup.TransitionPoll
	}
	return d, nil
}

// validate rejects flag values the provider cannot run with, before it
// connects to anything.
func (c *cli) validate() error {
	if c.MinPollInterval <= 0 {
		return fmt.Errorf("--min-poll-interval must be positive, not %s", c.MinPollInterval)
	}
	if c.RefusedTokenPause < c.minRefusedTokenPause() {
		return fmt.Errorf("--refused-token-pause must be at least %s, not %s: without a pause, retries with one refused token get the provider's address throttled by the Widget API for every tenant", c.minRefusedTokenPause(), c.RefusedTokenPause)
	}
	return nil
}

// newScheme returns the scheme of the kinds the provider reads and writes.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apis.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("cannot build scheme: %w", err)
		}
	}
	return scheme, nil
}

func run(c *cli) error {
	if err := c.validate(); err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	level := zapcore.InfoLevel
	if c.Debug {
		level = zapcore.DebugLevel
	}
	zl := zap.New(zap.Level(level), zap.UseDevMode(c.Debug))
	log := logging.NewLogrLogger(zl.WithName("provider-widget"))
	ctrl.SetLogger(zl)

	cfg, err := restConfig(c.Kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ratelimiter.LimitRESTConfig(cfg, c.MaxReconcileRate), ctrl.Options{
		Scheme:        scheme,
		WebhookServer: webhookServer(c),
		// managedFields are never read here, and are a large part of every
		// cached object: cachetrim drops them before objects are cached, and
		// shares the strings cached objects have in common.
		Cache: cache.Options{SyncPeriod: &c.SyncInterval, DefaultTransform: cachetrim.Transform},
		// Secrets are read from the API server, never cached: a cluster
		// holds many Secrets that are not the provider's (20,000 of 1 KiB
		// took 35 MB of heap), and the provider reads few: token Secrets
		// (for clients.TokenTTL) and the connection Secrets of WidgetKeys.
		Client:                     client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:             c.LeaderElection,
		LeaderElectionID:           "crossplane-leader-election-provider-widget",
		LeaderElectionNamespace:    c.LeaderElectionNamespace,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &c.LeaseDuration,
		RenewDeadline:              &c.RenewDeadline,
		RetryPeriod:                &c.RetryPeriod,
		Metrics:                    metricsserver.Options{BindAddress: c.MetricsBindAddress},
		HealthProbeBindAddress:     c.HealthProbeBindAddress,
		PprofBindAddress:           c.PprofBindAddress,

		// A leader that stops hands its lease over at once, not after
		// --lease-duration. Safe: the manager releases it once its runnables
		// have returned (or its 30s shutdown grace is over), and main exits
		// as soon as Start returns.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("cannot create controller manager: %w", err)
	}

	mrMetrics := managed.NewMRMetricRecorder()
	stateMetrics := statemetrics.NewMRStateMetrics()
	own := widgetmetrics.New()
	metrics.Registry.MustRegister(mrMetrics, stateMetrics)
	if err := own.Register(metrics.Registry); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}

	o := controller.Options{
		Logger:                  log,
		GlobalRateLimiter:       ratelimiter.NewGlobal(c.MaxReconcileRate),
		PollInterval:            c.PollInterval,
		MaxConcurrentReconciles: c.MaxReconcileRate,
		Features:                &feature.Flags{},
		MetricOptions: &controller.MetricOptions{
			PollStateMetricInterval: time.Minute,
			MRMetrics:               mrMetrics,
			MRStateMetrics:          stateMetrics,
		},
	}
	if c.EnableManagementPolicies {
		o.Features.Enable(feature.EnableBetaManagementPolicies)
	}
	if c.EnableChangeLogs {
		cl, err := changeLogs(mgr, c.ChangeLogsSocket, own, log)
		if err != nil {
			return err
		}
		o.ChangeLogOptions = &controller.ChangeLogOptions{ChangeLogger: cl}
	}
	if c.SafeStart {
		o.Gate = new(gate.Gate[schema.GroupVersionKind])
		if err := customresourcesgate.Setup(mgr, o); err != nil {
			return fmt.Errorf("cannot set up the CRD gate: %w", err)
		}
	}

	d, err := c.deps(mgr, own, log)
	if err != nil {
		return err
	}
	if err := widgetcontroller.Setup(mgr, o, d); err != nil {
		return err
	}
	if c.WebhookTLSCertDir != "" {
		if err := conversionwebhook.Setup(mgr, conversionwebhook.WithLimits(conversionwebhook.Limits{MaxRequestBytes: c.WebhookMaxRequestBytes})); err != nil {
			return err
		}
	} else {
		log.Info("Conversion webhook off (no WEBHOOK_TLS_CERT_DIR): requests for v1alpha1 Widgets and WidgetKeys will fail")
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("cannot add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("cannot add readiness check: %w", err)
	}
	if c.WebhookTLSCertDir != "" {
		// kube-apiserver reaches the conversion webhook through a Service
		// that routes to ready pods only: a replica is ready once its
		// webhook accepts TLS connections, not before.
		if err := mgr.AddReadyzCheck("conversion-webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("cannot add the conversion webhook's readiness check: %w", err)
		}
	}
	log.Info("Starting provider-widget", "version", version, "poll-interval", c.PollInterval.String(), "change-feed", c.ChangeFeed, "max-reconcile-rate", c.MaxReconcileRate)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// changeLogs returns the managed reconcilers' change logger, which queues
// entries for the sidecar at socket; the manager runs the queue's sender
// and closes the connection when it stops.
func changeLogs(mgr ctrl.Manager, socket string, m *widgetmetrics.Metrics, log logging.Logger) (managed.ChangeLogger, error) {
	conn, err := changelog.Dial(socket)
	if err != nil {
		return nil, err
	}
	q := changelog.NewQueue(v1alpha1.NewChangeLogServiceClient(conn),
		changelog.WithLogger(log.WithValues("component", "change-logs")),
		changelog.WithObserver(m.ChangeLogSent.Inc, func(reason string) { m.ChangeLogDropped.WithLabelValues(reason).Inc() }))
	if err := mgr.Add(changeLogSender{q: q, conn: conn}); err != nil {
		return nil, fmt.Errorf("cannot add the change log sender: %w", err)
	}
	log.Info("Change logs enabled", "socket", socket)
	return changelog.NewLogger(q, "provider-widget:"+version), nil
}

// changeLogSender runs the queue's sender on every replica, and closes the
// connection to the sidecar once the sender has sent what it could.
type changeLogSender struct {
	q    *changelog.Queue
	conn io.Closer
}

func (s changeLogSender) Start(ctx context.Context) error {
	err := s.q.Start(ctx)
	_ = s.conn.Close()
	return err
}

func (s changeLogSender) NeedLeaderElection() bool { return s.q.NeedLeaderElection() }

// webhookServer serves the conversion webhook over TLS 1.3 with the
// certificate Crossplane's package runtime provides, with bounded
// connections and read times; nil without a certificate.
func webhookServer(c *cli) webhook.Server {
	if c.WebhookTLSCertDir == "" {
		return nil
	}
	return conversionwebhook.NewServer(conversionwebhook.ServerOptions{
		Port:    c.WebhookPort,
		CertDir: c.WebhookTLSCertDir,
		TLSOpts: []func(*tls.Config){func(t *tls.Config) { t.MinVersion = tls.VersionTLS13 }},
	})
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("cannot find a Kubernetes API server (not in a cluster and no --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func retryPolicy(attempts int) widgetapi.RetryPolicy {
	return widgetapi.RetryPolicy{Attempts: max(attempts, 1), BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}
}
