// Package main is function-widget, a Crossplane composition function. It
// composes an XWidget - a Crossplane v2 namespaced XR, or a legacy XR behind
// a WidgetClaim - into a Widget and its WidgetKeys from provider-widget,
// decides the XR's readiness, reports conditions on the XR and its claim,
// writes the widget's endpoint and state to the XR's status, and makes the
// endpoint and keys available as connection details.
//
// Run it with --help for its flags. Crossplane connects to it with mutual
// TLS (--tls-certs-dir); --insecure serves plain gRPC for
// `crossplane render` and tests.
package main

import (
	"fmt"

	"github.com/alecthomas/kong"
	function "github.com/crossplane/function-sdk-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/health"

	"github.com/widgetco/crossplane-widget/function/fn"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "v0.0.0-dev"

// CLI of function-widget.
type CLI struct {
	Debug bool `help:"Emit debug logs in addition to info logs." short:"d"`

	Network            string `default:"tcp"              help:"Network on which to listen for gRPC connections."`
	Address            string `default:":9443"            help:"Address at which to listen for gRPC connections."`
	TLSCertsDir        string `env:"TLS_SERVER_CERTS_DIR" help:"Directory containing the server certificate (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)."`
	Insecure           bool   `help:"Serve gRPC without mTLS, for crossplane render and tests. --tls-certs-dir is then ignored."`
	MaxRecvMessageSize int    `default:"16"               help:"Maximum size of received messages in MiB. An Operation step receives every object its target selects (about 5.6 KiB per XWidget): 16 admits its default maxTargets, 1,000, with room to spare."`
	MetricsAddress     string `default:":8080"            help:"Address at which to serve Prometheus metrics at /metrics. Empty disables metrics."`
	HealthProbeAddress string `default:":8081"            help:"Address at which to serve /healthz and /readyz over HTTP for liveness and readiness probes. Empty disables them."`

	Version kong.VersionFlag `help:"Print the version and exit."`
}

// Run function-widget until its gRPC server stops.
func (c *CLI) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := fn.NewPrometheusMetrics(reg)
	if err != nil {
		return err
	}

	f, err := fn.NewFunction(fn.WithLogger(log), fn.WithMetrics(m))
	if err != nil {
		return err
	}

	if c.HealthProbeAddress != "" && c.Network == "tcp" {
		if err := fn.ServeHealth(c.HealthProbeAddress, c.Address); err != nil {
			return fmt.Errorf("cannot serve health probes on %s: %w", c.HealthProbeAddress, err)
		}
	}
	log.Info("Starting function-widget", "version", version, "address", c.Address, "insecure", c.Insecure, "metrics-address", c.MetricsAddress, "health-probe-address", c.HealthProbeAddress)
	return function.Serve(fn.Recover(f, log, m),
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024),
		function.WithHealthServer(health.NewServer()),
		function.WithMetricsServer(c.MetricsAddress),
		function.WithMetricsRegistry(reg))
}

func main() {
	ctx := kong.Parse(&CLI{},
		kong.Name("function-widget"),
		kong.Description("A Crossplane composition function that composes XWidgets into provider-widget's Widgets and WidgetKeys."),
		kong.Vars{"version": version},
		kong.UsageOnError())
	ctx.FatalIfErrorf(ctx.Run())
}
