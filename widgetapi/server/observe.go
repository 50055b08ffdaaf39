package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, on their own registry so
// several servers can run in one test process.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	throttled prometheus.Counter
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
	}
	m.reg.MustRegister(m.requests, m.duration, m.throttled)
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
	route   string
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

// Flush lets long polls flush through the wrapper.
func (l *logWriter) Flush() {
	if f, ok := l.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// accessLog writes one structured line per request: never headers, so
// never a token.
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
		s.metrics.requests.WithLabelValues(r.Method, route, strconv.Itoa(lw.status)).Inc()
		s.metrics.duration.WithLabelValues(r.Method, route).Observe(d.Seconds())
		s.log.Info("request",
			"method", r.Method,
			"path", r.URL.Path,
			"status", lw.status,
			"bytes", lw.bytes,
			"duration_ms", float64(d.Microseconds())/1000,
			"project", lw.project,
			"remote", r.RemoteAddr,
			"user_agent", r.UserAgent(),
		)
	})
}
