package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// metrics are the server's Prometheus metrics, on their own registry so
// several servers can run in one test process.
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	throttled     prometheus.Counter
	authThrottled prometheus.Counter
	pollsRefused  prometheus.Counter
	connsRefused  prometheus.Counter
	longPolls     prometheus.Gauge
	// tokensRefused counts identity tokens refused, by idtoken.Reason or
	// "role"; keyFetches counts fetches of issuers' keys, by issuer (from
	// the configuration) and result. Both label sets are bounded.
	tokensRefused *prometheus.CounterVec
	tokensOK      *prometheus.CounterVec
	keyFetches    *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widgetapi_requests_total",
			Help: "API requests by method, route and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "widgetapi_request_duration_seconds",
			Help:    "API request latency by method and route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method", "route"}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widgetapi_throttled_requests_total",
			Help: "Requests answered 429 by the per-token rate limit.",
		}),
		authThrottled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widgetapi_auth_throttled_requests_total",
			Help: "Requests answered 429 because their client address failed authentication too often.",
		}),
		pollsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widgetapi_long_polls_refused_total",
			Help: "Change feed long polls answered 429 because their token held the most allowed.",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widgetapi_connections_refused_total",
			Help: "Connections closed on accept because their client address held the most allowed.",
		}),
		longPolls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "widgetapi_long_polls",
			Help: "Change feed long polls being held.",
		}),
	}
	m.tokensRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "widgetapi_identity_tokens_refused_total",
		Help: "Identity tokens (JWTs) answered 401 or 403, by reason: malformed, algorithm, issuer, unknown_key, keys_unavailable, signature, audience, expired, not_yet_valid, unmapped (403), role (403: a viewer that tried to write).",
	}, []string{"reason"})
	m.tokensOK = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "widgetapi_identity_tokens_accepted_total",
		Help: "Identity tokens (JWTs) accepted, by configured issuer.",
	}, []string{"issuer"})
	m.keyFetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "widgetapi_identity_key_fetches_total",
		Help: "Fetches of trusted issuers' keys (discovery and JWKS, or the JWKS file), by configured issuer and result (ok, error).",
	}, []string{"issuer", "result"})
	for _, r := range idtoken.Reasons {
		m.tokensRefused.WithLabelValues(string(r))
	}
	m.tokensRefused.WithLabelValues(reasonRole)
	m.reg.MustRegister(m.requests, m.duration, m.throttled, m.authThrottled, m.pollsRefused, m.connsRefused, m.longPolls,
		m.tokensRefused, m.tokensOK, m.keyFetches)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// logWriter records what the access log needs.
type logWriter struct {
	http.ResponseWriter
	status  int
	bytes   int
	project string
	// subject is the identity token subject the request authenticated as.
	subject string
	// refused marks an answer that refuses its request whatever its
	// status (closeAfter).
	refused bool
	route   string
	// widget is the widget a create names (its path does not), so the
	// access log shows which widget every create was for.
	widget string
}

// logWidget records the widget a request names in its body.
func logWidget(w http.ResponseWriter, name string) {
	if lw, ok := w.(*logWriter); ok {
		lw.widget = clip(name, maxLogged)
	}
}

func (l *logWriter) WriteHeader(code int) {
	if l.status == 0 {
		l.status = code
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *logWriter) Write(b []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	n, err := l.ResponseWriter.Write(b)
	l.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection, e.g. to extend
// a long poll's write deadline.
func (l *logWriter) Unwrap() http.ResponseWriter { return l.ResponseWriter }

// Flush lets long polls flush through the wrapper.
func (l *logWriter) Flush() {
	if f, ok := l.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Bounds of what the access log repeats from a request, in bytes.
const (
	maxLoggedMethod = 32
	maxLogged       = 256
)

// methodLabel is the metrics label of an HTTP method: the method itself for
// the standard ones, "other" for anything a client made up, so clients
// cannot create label values (and time series) at will.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	default:
		return "other"
	}
}

// clip bounds a client-supplied string for a log line or an error: at most
// n bytes of valid UTF-8 (invalid bytes become U+FFFD), with a trailing "…"
// when it was cut.
func clip(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	const ellipsis = "…"
	cut := len(s) > n
	if cut {
		end := max(n-len(ellipsis), 0)
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		s = s[:end]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if cut {
		s += ellipsis
	}
	return s
}

// accessLog writes one structured line per request: never headers, so
// never a token. What it repeats from the request is clipped, so a line is
// bounded whatever the client sends; metrics label unknown methods "other".
// Refused requests (401, 429), which a client can send as fast as it likes,
// are logged within Options.RefusedLogRate; metrics count every request.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		lw := &logWriter{ResponseWriter: w}
		next.ServeHTTP(lw, r)
		d := time.Since(start)
		route := lw.route
		if route == "" {
			route = r.Pattern
		}
		if route == "" {
			route = "unmatched"
		}
		method := methodLabel(r.Method)
		s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(lw.status)).Inc()
		s.metrics.duration.WithLabelValues(method, route).Observe(d.Seconds())
		if (refused(lw.status) || lw.refused) && !s.refusedLog.allow(s.opts.Now()) {
			return
		}
		attrs := []any{
			"method", clip(r.Method, maxLoggedMethod),
			"path", clip(r.URL.Path, maxLogged),
		}
		if lw.widget != "" {
			attrs = append(attrs, "widget", lw.widget)
		}
		attrs = append(attrs,
			"status", lw.status,
			"bytes", lw.bytes,
			"duration_ms", float64(d.Microseconds())/1000,
			"project", lw.project,
		)
		if lw.subject != "" {
			attrs = append(attrs, "subject", lw.subject)
		}
		s.log.Info("request", append(attrs,
			"remote", clip(r.RemoteAddr, maxLogged),
			"user_agent", clip(r.UserAgent(), maxLogged),
		)...)
	})
}
