// Package metrics holds provider-widget's own Prometheus metrics: Widget API
// calls, drift repairs and change feed activity. crossplane-runtime's managed
// resource metrics are registered alongside them in main.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the provider's metrics. Create them with New and register them
// once.
type Metrics struct {
	// APIRequests counts Widget API calls by operation and status code ("0"
	// when no response arrived).
	APIRequests *prometheus.CounterVec
	// APILatency observes Widget API call latency by operation.
	APILatency *prometheus.HistogramVec
	// Updates counts widget updates by kind and cause: "drift" (the widget
	// changed outside Crossplane), "spec" (the user changed the spec),
	// "adopt" (the provider took over an unowned widget) or "takeover"
	// (from another control plane).
	Updates *prometheus.CounterVec
	// FeedChanges counts change feed entries received, by type.
	FeedChanges *prometheus.CounterVec
	// FeedEnqueues counts managed resources queued for reconciliation
	// because the change feed reported a change to them.
	FeedEnqueues prometheus.Counter
	// FeedSkips counts managed resources not queued for a change because
	// they had already seen the widget at that version (their own write).
	FeedSkips prometheus.Counter
	// CacheWaits counts reconciles put off because the informer cache had
	// not yet seen the controller's own last write of the resource, by
	// kind and outcome: "deferred" (put off briefly) or "expired" (the
	// cache did not catch up in time; reconciled anyway).
	CacheWaits *prometheus.CounterVec
	// UnchangedStatus counts status updates not sent because they would
	// have changed nothing, by kind.
	UnchangedStatus *prometheus.CounterVec
	// SecretReadsSaved counts connection Secret reads answered from the
	// memory of the provider's own recent reads and writes, by kind.
	SecretReadsSaved *prometheus.CounterVec
	// ChangeLogSent counts change log entries the change logs sidecar took.
	ChangeLogSent prometheus.Counter
	// ChangeLogDropped counts change log entries dropped, by reason:
	// "queue_full" (the sidecar was slower than the changes) or
	// "send_failed" (the sidecar did not take the entry in time).
	ChangeLogDropped *prometheus.CounterVec
}

// New returns unregistered metrics.
func New() *Metrics {
	return &Metrics{
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_api_requests_total",
			Help: "Widget API requests by operation and HTTP status code (0: no response).",
		}, []string{"operation", "code"}),
		APILatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "widget_api_request_duration_seconds",
			Help:    "Widget API request latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"operation"}),
		Updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_updates_total",
			Help: "Widgets updated to match their managed resource, by kind and cause (drift, spec, adopt).",
		}, []string{"kind", "cause"}),
		FeedChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_feed_changes_total",
			Help: "Change feed entries received from the Widget API, by type.",
		}, []string{"type"}),
		FeedEnqueues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widget_feed_enqueues_total",
			Help: "Managed resources queued for reconciliation by the change feed.",
		}),
		FeedSkips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widget_feed_skips_total",
			Help: "Managed resources not queued for a change feed entry because they had already seen that version of the widget (typically their own write).",
		}),
		CacheWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_stale_cache_waits_total",
			Help: "Reconciles put off because the cache had not yet seen the provider's own last write of the resource, by kind and outcome (deferred; expired: reconciled anyway).",
		}, []string{"kind", "outcome"}),
		UnchangedStatus: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_unchanged_status_updates_skipped_total",
			Help: "Managed resource status updates not sent because they would have changed nothing, by kind.",
		}, []string{"kind"}),
		SecretReadsSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_connection_secret_reads_saved_total",
			Help: "Connection Secret reads answered from the memory of the provider's own reads and writes of the Secret in the last half poll interval (at most 5 minutes), by kind.",
		}, []string{"kind"}),
		ChangeLogSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "widget_changelog_entries_sent_total",
			Help: "Change log entries (one per create, update and delete of an external resource, with --enable-changelogs) the change logs sidecar took.",
		}),
		ChangeLogDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "widget_changelog_entries_dropped_total",
			Help: "Change log entries dropped rather than hold up a reconcile, by reason (queue_full: the sidecar was slower than the changes; send_failed: the sidecar did not take the entry in time).",
		}, []string{"reason"}),
	}
}

// Register registers every metric with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.APIRequests, m.APILatency, m.Updates, m.FeedChanges, m.FeedEnqueues, m.FeedSkips, m.CacheWaits, m.UnchangedStatus, m.SecretReadsSaved, m.ChangeLogSent, m.ChangeLogDropped} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// ObserveAPI records one Widget API call; it is a widgetapi.ObserveFunc.
func (m *Metrics) ObserveAPI(op string, status int, d time.Duration) {
	m.APIRequests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.APILatency.WithLabelValues(op).Observe(d.Seconds())
}
