// Package server is the reference implementation of the Widget API: durable
// (bbolt), project-scoped bearer-token auth, asynchronous provisioning,
// optimistic concurrency, rate limits, a change feed and fault injection.
// The contract it implements is widgetapi/openapi.yaml.
package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// Options configure a Server. The zero value of every field is usable except
// DataDir.
type Options struct {
	// DataDir holds the database file. Required.
	DataDir string
	// Tokens maps bearer tokens to the project they belong to.
	Tokens map[string]string
	// IdentityTokens, when set, also accepts OIDC identity tokens (signed
	// JWTs, such as Kubernetes ServiceAccount tokens) from the issuers it
	// trusts, mapping their subjects to a project and a role. A bearer
	// token that is a static token is always one: identity tokens never
	// shadow static ones. New validates it and fills in its defaults.
	IdentityTokens *idtoken.Config
	// IdentityTokenOptions are passed to the identity token authenticator;
	// Now and OnFetch are the server's. Tests set fetchers or CAs here.
	IdentityTokenOptions idtoken.Options

	// ProvisionDelay is how long a new widget stays Provisioning.
	ProvisionDelay time.Duration
	// ResizeDelay is how long a size change keeps a widget Resizing.
	ResizeDelay time.Duration
	// DeleteDelay is how long a widget stays Deleting before it is gone.
	DeleteDelay time.Duration

	// DefaultRegion is used when a create names no region (default us-east-1).
	DefaultRegion string
	// Regions, when not empty, is the set of regions a widget may use.
	Regions []string
	// FailingRegions are regions where provisioning ends in Failed: a way to
	// exercise failure handling deterministically.
	FailingRegions []string

	// RateLimit is the sustained requests per second allowed per token; 0
	// disables rate limiting. RateBurst is the bucket size (default
	// 2*RateLimit).
	RateLimit float64
	RateBurst int

	// FaultLatency is added to every API request.
	FaultLatency time.Duration
	// FaultErrorRate is the fraction (0..1) of API requests answered with
	// 503 before they are processed.
	FaultErrorRate float64

	// FeedRetention is how many change feed entries the server keeps per
	// project (default 100000). Feeds are per project, sequence numbers
	// included, so one project's writes neither show in nor shorten
	// another's feed.
	FeedRetention uint64
	// MaxWait bounds a change feed long poll (default 60s). It may not
	// exceed widgetapi.MaxChangesWait, the most a client may ask for.
	MaxWait time.Duration

	// FailedAuthRate is how many failed authentication attempts per second
	// one client address earns back (default 1); FailedAuthBurst is how many
	// it may make in a row (default 20). An identity token not seen to
	// verify before is charged before it is verified and refunded when it
	// verifies. Once the budget is spent, a /v1 request from that address
	// is answered 429 without its token being checked, until the bucket
	// refills, unless it carries a static token of at least
	// MinUnthrottledTokenBytes or an identity token seen to verify before:
	// those are served. IPv4 addresses count singly, IPv6 addresses by /64.
	// A negative FailedAuthRate disables the throttle.
	FailedAuthRate  float64
	FailedAuthBurst int
	// FailedAuthAddresses bounds the memory of the throttle: it remembers at
	// most this many client addresses, forgetting the least recently failed
	// first (default 10000).
	FailedAuthAddresses int

	// Connection limits of the http.Server that HTTPServer returns. Zero
	// means the default; a negative value means none.
	//
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (default
	// 30s).
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its response (default 30s). A change feed long poll gets its wait
	// on top, so it can always answer.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request (default 120s, longer than Go clients keep idle connections).
	IdleTimeout time.Duration
	// MaxConns bounds the connections LimitListener lets in at once
	// (default 1024). Further clients wait in the listen backlog until a
	// connection closes.
	MaxConns int
	// MaxConnsPerAddr bounds the connections one client address (IPv4
	// address, IPv6 /64) holds at once (default 64, twice what the
	// provider opens to one endpoint); further ones are closed as soon as
	// they are accepted. Loopback addresses are exempt unless
	// LimitLoopback is set: on one host every client is 127.0.0.1.
	MaxConnsPerAddr int
	LimitLoopback   bool
	// UnauthIdleTimeout is how long a connection that has not yet
	// authenticated a request may wait for the headers of its next one,
	// its first included (default 5s). After a request authenticates,
	// IdleTimeout applies. Every 401 and 429 answer closes its connection,
	// and so does a 403 to an identity token whose subject maps to no
	// project.
	UnauthIdleTimeout time.Duration
	// MaxPollsPerToken bounds the change feed long polls (requests with a
	// wait) one token holds at once (default 8); further ones are answered
	// 429 with Retry-After at once.
	MaxPollsPerToken int

	// RefusedLogRate bounds the log lines of refused requests (401, 429),
	// refused connections (over MaxConnsPerAddr) and connection errors
	// (failed TLS handshakes and the like), in lines per second with a
	// burst of as many (default 10). Lines over the budget are counted
	// and reported every RefusedLogInterval (default 10s) in one
	// "refused requests not logged" line. Other requests are always logged.
	// A negative RefusedLogRate logs every line.
	RefusedLogRate     float64
	RefusedLogInterval time.Duration

	// Logger receives the access log and lifecycle events (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests may replace it.
	Now func() time.Time
}

// Server serves the Widget API. Create it with New, serve Handler(), and
// Close it to stop background work and release the database.
type Server struct {
	opts   Options
	store  *store
	tokens map[[32]byte]string
	// idtokens verifies identity tokens; nil when none are trusted.
	idtokens *idtoken.Authenticator
	log      *slog.Logger
	metrics  *metrics
	feed     *notifier
	sched    *scheduler

	mu       sync.Mutex
	limiters map[[32]byte]*rate.Limiter
	// authFail throttles failed authentication per client address; nil
	// when disabled.
	authFail *authThrottle
	// polls counts the long polls each token holds (see MaxPollsPerToken).
	polls map[[32]byte]int

	conns      *connGuard
	refusedLog *logBudget

	faultMu sync.RWMutex
	faults  Faults

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// Faults are injected into API requests (not /healthz or /metrics).
type Faults struct {
	// Latency delays every request before it is processed.
	Latency time.Duration
	// ErrorRate is the share of requests answered 503 unprocessed.
	ErrorRate float64
	// HoldWriteResponse delays the response to every write (POST, PUT,
	// PATCH, DELETE) after it has been processed and committed: a window in
	// which a client may die not knowing its write succeeded.
	HoldWriteResponse time.Duration
}

// New opens (or creates) the database in opts.DataDir, schedules the state
// transitions that were pending when the server last stopped, and returns a
// ready server.
func New(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("a data directory is required")
	}
	if opts.DefaultRegion == "" {
		opts.DefaultRegion = "us-east-1"
	}
	if opts.FeedRetention == 0 {
		opts.FeedRetention = 100000
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 60 * time.Second
	}
	if opts.MaxWait > widgetapi.MaxChangesWait {
		return nil, fmt.Errorf("the longest change feed wait must be at most %s, the contract's limit", widgetapi.MaxChangesWait)
	}
	opts.FailedAuthRate = orDefault(opts.FailedAuthRate, 1)
	opts.FailedAuthBurst = orDefault(opts.FailedAuthBurst, 20)
	opts.FailedAuthAddresses = orDefault(opts.FailedAuthAddresses, 10000)
	opts.ReadHeaderTimeout = orDefault(opts.ReadHeaderTimeout, 10*time.Second)
	opts.ReadTimeout = orDefault(opts.ReadTimeout, 30*time.Second)
	opts.WriteTimeout = orDefault(opts.WriteTimeout, 30*time.Second)
	opts.IdleTimeout = orDefault(opts.IdleTimeout, 120*time.Second)
	opts.MaxConns = orDefault(opts.MaxConns, 1024)
	opts.MaxConnsPerAddr = orDefault(opts.MaxConnsPerAddr, 64)
	opts.UnauthIdleTimeout = orDefault(opts.UnauthIdleTimeout, 5*time.Second)
	opts.MaxPollsPerToken = orDefault(opts.MaxPollsPerToken, 8)
	opts.RefusedLogRate = orDefault(opts.RefusedLogRate, 10)
	opts.RefusedLogInterval = orDefault(opts.RefusedLogInterval, 10*time.Second)
	if opts.RateLimit > 0 && opts.RateBurst <= 0 {
		opts.RateBurst = max(int(2*opts.RateLimit), 1)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	st, err := openStore(filepath.Join(opts.DataDir, "widgets.db"), opts.FeedRetention)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:       opts,
		store:      st,
		tokens:     make(map[[32]byte]string, len(opts.Tokens)),
		log:        opts.Logger,
		metrics:    newMetrics(),
		feed:       newNotifier(),
		limiters:   map[[32]byte]*rate.Limiter{},
		authFail:   newAuthThrottle(opts.FailedAuthRate, opts.FailedAuthBurst, opts.FailedAuthAddresses),
		polls:      map[[32]byte]int{},
		refusedLog: newLogBudget(opts.RefusedLogRate),
		faults:     Faults{Latency: opts.FaultLatency, ErrorRate: opts.FaultErrorRate},
		stop:       make(chan struct{}),
	}
	for tok, project := range opts.Tokens {
		s.tokens[sha256.Sum256([]byte(tok))] = project
	}
	if opts.IdentityTokens != nil {
		io := opts.IdentityTokenOptions
		io.Now = opts.Now
		io.OnFetch = s.keysFetched
		if s.idtokens, err = idtoken.New(opts.IdentityTokens, io); err != nil {
			_ = st.close()
			return nil, fmt.Errorf("cannot configure identity tokens: %w", err)
		}
		s.idtokens.Start()
	}
	s.conns = newConnGuard(opts.MaxConnsPerAddr, opts.LimitLoopback, opts.UnauthIdleTimeout, s.refusedConn)
	s.sched = newScheduler(opts.Now, s.advance)
	if err := s.resumeTransitions(); err != nil {
		if s.idtokens != nil {
			s.idtokens.Close()
		}
		_ = st.close()
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.sched.run(s.stop)
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.summarizeRefused()
	}()
	return s, nil
}

// Close stops background work, wakes every long poll and closes the
// database. In-flight requests should be drained (http.Server.Shutdown)
// first; call Shutdown to release long polls before that.
func (s *Server) Close() error {
	s.Shutdown()
	if s.idtokens != nil {
		s.idtokens.Close()
	}
	s.wg.Wait()
	return s.store.close()
}

// Shutdown releases long polls so an http.Server can drain. It is safe to
// call more than once.
func (s *Server) Shutdown() {
	s.stopOnce.Do(func() { close(s.stop) })
}

// SetFaults changes fault injection at run time.
func (s *Server) SetFaults(f Faults) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.faults = f
}

// orDefault returns def for the zero value and v otherwise.
func orDefault[T int | float64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Registry returns the server's Prometheus metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// Handler returns the HTTP handler for the whole API.
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	for _, rt := range s.routes() {
		api.HandleFunc(rt.pattern, named(rt.pattern, rt.handler))
	}
	api.HandleFunc("/v1/", func(w http.ResponseWriter, _ *http.Request) {
		problem(w, http.StatusNotFound, "not_found", "no such API route; see openapi.yaml")
	})

	mux := http.NewServeMux()
	mux.Handle("/v1/", s.authenticate(s.limit(s.inject(api))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET /metrics", s.metrics.handler())
	return s.recover(s.accessLog(mux))
}

type route struct {
	pattern string
	handler http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		{"POST /v1/widgets", s.createWidget},
		{"GET /v1/widgets", s.listWidgets},
		{"GET /v1/widgets/{name}", s.getWidget},
		{"PUT /v1/widgets/{name}", s.replaceWidget},
		{"PATCH /v1/widgets/{name}", s.patchWidget},
		{"DELETE /v1/widgets/{name}", s.deleteWidget},
		{"POST /v1/widgets/{name}/keys", s.createKey},
		{"GET /v1/widgets/{name}/keys", s.listKeys},
		{"GET /v1/widgets/{name}/keys/{key}", s.getKey},
		{"DELETE /v1/widgets/{name}/keys/{key}", s.deleteKey},
		{"POST /v1/widgets/{name}/verify-key", s.verifyKey},
		{"GET /v1/changes", s.listChanges},
	}
}

// Routes lists the API's "METHOD /path" patterns, for checking them against
// the contract.
func (s *Server) Routes() []string {
	rs := s.routes()
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.pattern)
	}
	return out
}

// named records the matched route for the access log and metrics: the
// middlewares copy the request, so the outer handler never sees the inner
// mux's r.Pattern.
func named(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if lw, ok := w.(*logWriter); ok {
			lw.route = pattern
		}
		h(w, r)
	}
}

type ctxKey struct{}

// projectOf returns the project the request's token belongs to.
func projectOf(r *http.Request) string { p, _ := r.Context().Value(ctxKey{}).(string); return p }

// authenticate resolves the bearer token to a project. Tokens are compared
// by their SHA-256 so lookup time does not depend on how much of a guess
// matches. A client address that failed too often is answered 429 instead
// of having its token checked, except for the credentials that are cheap
// to check and cannot be guessed (see servesThrottled), so guessing and
// the CPU refusals cost stay bounded per address while one client's
// refused tokens do not deny the other clients behind the same address.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddr(r.RemoteAddr)
		now := s.opts.Now()
		tok, ok := bearer(r)
		if ok {
			h := sha256.Sum256([]byte(tok))
			project, found := s.tokens[h]
			if found && (servesThrottled(tok) || s.authFail.wait(addr, now) == 0) {
				s.serveAs(w, r, project, h, next)
				return
			}
			if !found && s.idtokens != nil && looksLikeJWT(tok) {
				s.authenticateIdentity(w, r, addr, tok, next)
				return
			}
		}
		if wait := s.authFail.wait(addr, now); wait > 0 {
			s.throttled(w, wait)
			return
		}
		s.authFail.failed(addr, now)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="widget-api"`)
			problem(w, http.StatusUnauthorized, "unauthorized", "send an Authorization: Bearer <token> header")
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="widget-api", error="invalid_token"`)
		problem(w, http.StatusUnauthorized, "unauthorized", "the bearer token is not valid")
	})
}

// serveAs serves r as an authenticated caller of project, whose limits
// (rate, long polls) are keyed by id.
func (s *Server) serveAs(w http.ResponseWriter, r *http.Request, project string, id [32]byte, next http.Handler) {
	markAuthenticated(r)
	if lw, ok := w.(*logWriter); ok {
		lw.project = project
	}
	ctx := context.WithValue(r.Context(), ctxKey{}, project)
	ctx = context.WithValue(ctx, tokenKey{}, id)
	next.ServeHTTP(w, r.WithContext(ctx))
}

type tokenKey struct{}

func bearer(r *http.Request) (string, bool) {
	const p = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(p) || !equalFold(h[:len(p)], p) {
		return "", false
	}
	return h[len(p):], true
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// limit applies the per-token rate limit: 429 with Retry-After when the
// token's bucket is empty.
func (s *Server) limit(next http.Handler) http.Handler {
	if s.opts.RateLimit <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := r.Context().Value(tokenKey{}).([32]byte)
		s.mu.Lock()
		l, ok := s.limiters[h]
		if !ok {
			l = rate.NewLimiter(rate.Limit(s.opts.RateLimit), s.opts.RateBurst)
			s.limiters[h] = l
		}
		s.mu.Unlock()
		res := l.ReserveN(s.opts.Now(), 1)
		if d := res.DelayFrom(s.opts.Now()); d > 0 {
			res.Cancel()
			s.metrics.throttled.Inc()
			rateLimited(w, d)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// inject applies fault injection: added latency, and a share of requests
// answered 503 before they do anything.
func (s *Server) inject(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.faultMu.RLock()
		f := s.faults
		s.faultMu.RUnlock()
		if hold := f.Latency + max(f.HoldWriteResponse, 0); hold > 0 {
			s.extendWriteDeadline(w, hold)
		}
		if f.Latency > 0 {
			select {
			case <-time.After(f.Latency):
			case <-r.Context().Done():
				return
			}
		}
		if f.ErrorRate > 0 && rand.Float64() < f.ErrorRate { //nolint:gosec // fault injection needs no cryptographic randomness
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusServiceUnavailable, "unavailable", "injected fault: the service is temporarily unavailable")
			return
		}
		if f.HoldWriteResponse <= 0 || r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		select {
		case <-time.After(f.HoldWriteResponse):
		case <-r.Context().Done():
			return
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// recover turns a handler panic into a 500 so one bad request cannot take
// the server down.
func (s *Server) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint,err113 // sentinel panic value
					panic(v)
				}
				s.log.Error("handler panic", "method", clip(r.Method, maxLoggedMethod), "path", clip(r.URL.Path, maxLogged), "panic", clip(fmt.Sprint(v), maxLogged))
				problem(w, http.StatusInternalServerError, "internal", "internal server error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
