// Command widget-api runs the reference Widget API server.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// version is stamped by the Makefile (-X main.version).
var version = "dev"

// cli is the server's command line.
type cli struct {
	Version kong.VersionFlag `help:"Print the version and exit."`

	Listen         string `default:"127.0.0.1:8080" help:"Address to listen on. Loopback by default; set 0.0.0.0:8080 deliberately to serve other hosts."`
	DataDir        string `required:"" type:"path" help:"Directory for the database (created if missing). Every acknowledged write is fsynced here."`
	TokensFile     string `type:"existingfile" help:"File of '<token> <project>' lines. A token sees only its project's widgets. Required unless --identity-config is set."`
	IdentityConfig string `type:"existingfile" help:"YAML file of trusted OIDC issuers whose identity tokens (JWTs, e.g. Kubernetes ServiceAccount tokens) are accepted as bearer tokens, and of the subjects each maps to a project and a role. See docs/widget-api.md#identity-tokens."`

	ProvisionDelay time.Duration `default:"5s" help:"How long a new widget stays Provisioning before it is Ready."`
	ResizeDelay    time.Duration `default:"3s" help:"How long a size change keeps a widget Resizing."`
	DeleteDelay    time.Duration `default:"2s" help:"How long a deleted widget stays Deleting before it is gone."`

	DefaultRegion  string   `default:"us-east-1" help:"Region for widgets created without one."`
	Regions        []string `help:"Allowed regions (comma-separated). Empty allows any well-formed region."`
	FailingRegions []string `help:"Regions where provisioning ends in Failed (for exercising failure handling)."`

	RateLimit float64 `default:"50" help:"Sustained requests per second allowed per token; 0 disables the limit."`
	RateBurst int     `default:"0" help:"Burst size per token (default twice the rate limit)."`

	FaultLatency   time.Duration `default:"0s" help:"Latency added to every API request (fault injection)."`
	FaultErrorRate float64       `default:"0" help:"Fraction of API requests (0..1) answered 503 before processing (fault injection)."`

	FeedRetention uint64        `default:"100000" help:"Number of change feed entries to keep per project."`
	MaxWait       time.Duration `default:"60s" help:"Longest change feed long poll (at most 5m, the contract's limit)."`

	FailedAuthRate      float64 `default:"1" help:"Failed authentication attempts per second one client address earns back; once its burst is spent it gets 429 without its token being checked, except for static tokens of 24 bytes or more and identity tokens that verified before. 0 disables."`
	FailedAuthBurst     int     `default:"20" help:"Failed authentication attempts one client address may make in a row."`
	FailedAuthAddresses int     `default:"10000" help:"Client addresses the failed-authentication throttle remembers (least recently failed forgotten first)."`

	ReadHeaderTimeout time.Duration `default:"10s" help:"Longest time to read a request's headers. 0 disables."`
	ReadTimeout       time.Duration `default:"30s" help:"Longest time to read a whole request, body included. 0 disables."`
	WriteTimeout      time.Duration `default:"30s" help:"Longest time from a request's headers to the end of its response; change feed long polls get their wait on top. 0 disables."`
	IdleTimeout       time.Duration `default:"120s" help:"How long a keep-alive connection may wait for its next request. 0 disables."`
	MaxConns          int           `default:"1024" help:"Most connections served at once; further clients wait in the listen backlog. 0 disables."`
	MaxConnsPerAddr   int           `default:"64" help:"Most connections one client address (IPv4 address, IPv6 /64) holds at once; further ones are closed on accept. Loopback clients are exempt unless --limit-loopback. 0 disables."`
	LimitLoopback     bool          `help:"Apply --max-conns-per-addr to loopback clients too. Off by default: on one host (a sidecar, a local control plane) every client is 127.0.0.1."`
	UnauthIdleTimeout time.Duration `default:"5s" help:"How long a connection that has not authenticated a request may wait for its next request's headers (its first included); --idle-timeout applies once one has. 401 and 429 answers close their connection. 0 disables."`
	MaxPollsPerToken  int           `default:"8" help:"Most change feed long polls one token holds at once; further ones are answered 429 with Retry-After. 0 disables."`

	RefusedLogRate     float64       `default:"10" help:"Most log lines a second for refused requests (401, 429), refused connections and connection errors (failed TLS handshakes); the rest are counted in a periodic summary line. 0 logs every one."`
	RefusedLogInterval time.Duration `default:"10s" help:"How often the count of refused requests left out of the log is written."`

	TLSCert string `type:"existingfile" help:"TLS certificate (PEM). Serves HTTPS when set with --tls-key."`
	TLSKey  string `type:"existingfile" help:"TLS private key (PEM)."`

	LogFormat string `default:"text" enum:"text,json" help:"Access log format: text or json."`
	Debug     bool   `help:"Log at debug level."`
}

func main() {
	c := &cli{}
	kong.Parse(c,
		kong.Name("widget-api"),
		kong.Description("The reference Widget API server: widgets and access keys over HTTP/JSON under /v1, "+
			"bearer-token auth per project, durable storage, asynchronous provisioning, a change feed (GET /v1/changes), "+
			"rate limits and fault injection. Health at /healthz, Prometheus metrics at /metrics."),
		kong.UsageOnError(),
		kong.Vars{"version": version})
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "widget-api:", err)
		os.Exit(1)
	}
}

// off maps a flag's 0 ("none") to the server option's negative ("none"),
// since a zero option means its default.
func off[T int | float64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

func run(c *cli) error {
	level := slog.LevelInfo
	if c.Debug {
		level = slog.LevelDebug
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(h)

	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	if c.FaultErrorRate < 0 || c.FaultErrorRate > 1 {
		return errors.New("--fault-error-rate must be between 0 and 1")
	}
	if c.FailedAuthRate < 0 || c.FailedAuthBurst < 1 || c.FailedAuthAddresses < 1 {
		return errors.New("--failed-auth-rate must be 0 or more, --failed-auth-burst and --failed-auth-addresses at least 1")
	}
	if c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.UnauthIdleTimeout < 0 ||
		c.MaxConns < 0 || c.MaxConnsPerAddr < 0 || c.MaxPollsPerToken < 0 || c.RefusedLogRate < 0 {
		return errors.New("timeouts, --max-conns, --max-conns-per-addr, --max-polls-per-token and --refused-log-rate must be 0 (none) or more")
	}
	if c.RefusedLogInterval <= 0 {
		return errors.New("--refused-log-interval must be positive")
	}
	if c.TokensFile == "" && c.IdentityConfig == "" {
		return errors.New("set --tokens-file, --identity-config or both")
	}
	var tokens map[string]string
	if c.TokensFile != "" {
		var err error
		if tokens, err = server.LoadTokens(c.TokensFile); err != nil {
			return err
		}
		if n := shortTokens(tokens); n > 0 {
			log.Warn("static tokens shorter than the unthrottled length are refused, like a guess, from an address that failed authentication too often; generate tokens of at least that many random characters",
				"short_tokens", n, "unthrottled_length", server.MinUnthrottledTokenBytes)
		}
	}
	var identity *idtoken.Config
	if c.IdentityConfig != "" {
		var err error
		if identity, err = idtoken.LoadConfig(c.IdentityConfig); err != nil {
			return err
		}
	}
	srv, err := server.New(server.Options{
		DataDir:        c.DataDir,
		Tokens:         tokens,
		IdentityTokens: identity,
		ProvisionDelay: c.ProvisionDelay,
		ResizeDelay:    c.ResizeDelay,
		DeleteDelay:    c.DeleteDelay,
		DefaultRegion:  c.DefaultRegion,
		Regions:        c.Regions,
		FailingRegions: c.FailingRegions,
		RateLimit:      c.RateLimit,
		RateBurst:      c.RateBurst,
		FaultLatency:   c.FaultLatency,
		FaultErrorRate: c.FaultErrorRate,
		FeedRetention:  c.FeedRetention,
		MaxWait:        c.MaxWait,

		FailedAuthRate:      off(c.FailedAuthRate),
		FailedAuthBurst:     c.FailedAuthBurst,
		FailedAuthAddresses: c.FailedAuthAddresses,

		ReadHeaderTimeout: off(c.ReadHeaderTimeout),
		ReadTimeout:       off(c.ReadTimeout),
		WriteTimeout:      off(c.WriteTimeout),
		IdleTimeout:       off(c.IdleTimeout),
		MaxConns:          off(c.MaxConns),
		MaxConnsPerAddr:   off(c.MaxConnsPerAddr),
		LimitLoopback:     c.LimitLoopback,
		UnauthIdleTimeout: off(c.UnauthIdleTimeout),
		MaxPollsPerToken:  off(c.MaxPollsPerToken),

		RefusedLogRate:     off(c.RefusedLogRate),
		RefusedLogInterval: c.RefusedLogInterval,

		Logger: log,
	})
	if err != nil {
		return err
	}

	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", c.Listen)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("cannot listen on %s: %w", c.Listen, err)
	}
	ln = srv.LimitListener(ln)
	hs := srv.HTTPServer()
	scheme := "http"
	if c.TLSCert != "" {
		scheme = "https"
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	log.Info("serving the Widget API", "url", scheme+"://"+ln.Addr().String(), "data_dir", c.DataDir, "static_tokens", len(tokens), "identity_issuers", identityIssuers(identity),
		"max_conns_per_addr", c.MaxConnsPerAddr, "loopback_exempt", !c.LimitLoopback)

	errc := make(chan error, 1)
	go func() {
		if scheme == "https" {
			errc <- hs.ServeTLS(ln, c.TLSCert, c.TLSKey)
			return
		}
		errc <- hs.Serve(ln)
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	select {
	case err := <-errc:
		_ = srv.Close()
		return fmt.Errorf("server stopped: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining requests")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Error("cannot drain all requests", "error", err)
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("cannot close the database: %w", err)
	}
	log.Info("stopped")
	return nil
}

func identityIssuers(c *idtoken.Config) int {
	if c == nil {
		return 0
	}
	return len(c.Issuers)
}

// shortTokens counts the tokens the failed-authentication throttle holds
// back with their address (server.MinUnthrottledTokenBytes).
func shortTokens(tokens map[string]string) int {
	n := 0
	for tok := range tokens {
		if len(tok) < server.MinUnthrottledTokenBytes {
			n++
		}
	}
	return n
}
