package conversionwebhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ServerOptions configure NewServer.
type ServerOptions struct {
	// Host and Port to listen on; Port defaults to 9443.
	Host string
	Port int

	// CertDir holds the serving certificate and key, tls.crt and tls.key,
	// which are reloaded when they change.
	CertDir string

	// MaxConnections is how many connections are served at once; more
	// wait to be accepted. Defaults to DefaultMaxConnections.
	MaxConnections int

	// MaxConnectionsPerAddress is how many of them one client address (an
	// IPv4 address, or an IPv6 /64) may hold. Its further connections wait,
	// without holding one of the MaxConnections, until one of its own
	// closes; those still waiting after ReadHeaderTimeout, and those beyond
	// MaxConnectionsPerAddress*4 waiting at once, are closed. Loopback
	// addresses count like any other. Defaults to
	// DefaultMaxConnectionsPerAddress.
	MaxConnectionsPerAddress int

	// TLSOpts change the TLS configuration, e.g. its minimum version.
	TLSOpts []func(*tls.Config)

	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server's; zero ones default to the constants of the same name.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// Bounds on the webhook server's connections. kube-apiserver multiplexes its
// conversion requests over a few HTTP/2 connections and sends them fast, so
// these leave a wide margin for it; they bound what slow or idle clients can
// hold.
const (
	// DefaultMaxConnections is how many connections are served at once.
	DefaultMaxConnections = 32
	// DefaultMaxConnectionsPerAddress is how many of them one client
	// address may hold, so that one address cannot hold them all. An
	// apiserver replica is one address and shares one HTTP/2 connection
	// between its conversions; the extra connections a burst of its first
	// requests dials wait rather than fail (TestConversionBurst).
	DefaultMaxConnectionsPerAddress = 8
	// MaxStreamsPerConnection is how many HTTP/2 requests one connection
	// may have open at once.
	MaxStreamsPerConnection = 32

	// ReadHeaderTimeout bounds the TLS handshake and the request headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout = 15 * time.Second
	// WriteTimeout bounds serving a request: kube-apiserver gives up on a
	// conversion after 30 seconds.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes a connection without requests.
	IdleTimeout = 60 * time.Second
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
)

// NewServer returns a webhook server like controller-runtime's default one
// (same handler registration and metrics, certificate reloading, TLS), whose
// http.Server also has a read timeout, a write timeout and a cap on
// connections and HTTP/2 streams; controller-runtime's sets only a 32 second
// header timeout.
//
// It does not authenticate clients: kube-apiserver calls conversion webhooks
// without a client certificate or token (apiextensions-apiserver builds its
// webhook client from an empty kubeconfig, unlike admission webhooks'), so
// a NetworkPolicy admitting only the API server is what keeps other callers
// out (docs/install.md#admit-only-the-api-server-to-the-conversion-webhook).
// Without one, the server's bounds keep one client address from holding
// more than MaxConnectionsPerAddress connections.
func NewServer(o ServerOptions) webhook.Server {
	if o.Port == 0 {
		o.Port = 9443
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerAddress <= 0 {
		o.MaxConnectionsPerAddress = DefaultMaxConnectionsPerAddress
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.ReadHeaderTimeout, ReadHeaderTimeout}, {&o.ReadTimeout, ReadTimeout}, {&o.WriteTimeout, WriteTimeout}, {&o.IdleTimeout, IdleTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return &Server{
		// The default server registers handlers, with their metrics, on
		// its mux; it is never started.
		Server: webhook.NewServer(webhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir}),
		o:      o,
	}
}

// A Server is a webhook.Server with bounded connections and read times.
type Server struct {
	webhook.Server // Register and WebhookMux.

	o ServerOptions

	mu      sync.Mutex
	started bool
}

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	cfg := &tls.Config{NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	for _, op := range s.o.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(s.o.CertDir, "tls.crt"), filepath.Join(s.o.CertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("cannot load the webhook's certificate: %w", err)
		}
		cfg.GetCertificate = w.GetCertificate
		go func() { _ = w.Start(ctx) }()
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(s.o.Host, strconv.Itoa(s.o.Port)))
	if err != nil {
		return fmt.Errorf("cannot listen for the webhook: %w", err)
	}
	srv := &http.Server{
		Handler:           s.WebhookMux(),
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		ReadTimeout:       s.o.ReadTimeout,
		WriteTimeout:      s.o.WriteTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxStreamsPerConnection},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		// ctx is done: the shutdown gets its own minute to drain.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if err := srv.Serve(tls.NewListener(limitListener(l, s.o.MaxConnections, s.o.MaxConnectionsPerAddress, s.o.ReadHeaderTimeout), cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cannot serve the webhook: %w", err)
	}
	<-done
	return nil
}

// StartedChecker is healthy once the server accepts TLS connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(req *http.Request) error {
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started {
			return errors.New("the webhook server has not started yet")
		}
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // Only checks that the server answers.
		conn, err := d.DialContext(req.Context(), "tcp", net.JoinHostPort(s.o.Host, strconv.Itoa(s.o.Port)))
		if err != nil {
			return fmt.Errorf("cannot reach the webhook server: %w", err)
		}
		return conn.Close()
	}
}

// NeedLeaderElection is false: every replica serves conversions.
func (s *Server) NeedLeaderElection() bool { return false }
