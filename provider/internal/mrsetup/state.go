package mrsetup

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stateRecorder is layer 11, copyFreeStateMetrics (see the package comment;
// TestRuntimeStateMetricsAreOurs pins that it publishes what
// crossplane-runtime's recorder would). It records how many managed
// resources of a kind exist, are
// Ready and are Synced: crossplane-runtime's managed resource state metrics
// (crossplane_managed_resource_{exists,ready,synced}, labelled by GVK), as
// its statemetrics.MRStateRecorder records them, but without copying the
// resources. That recorder lists a deep copy of every cached resource each
// interval and keeps the list until the next one: 14 MB of the provider's
// heap at 10,000 Widgets. It also stops the provider when a list fails;
// this one logs and tries again at the next interval.
type stateRecorder struct {
	cache    client.Reader
	newList  func() resource.ManagedList
	labels   prometheus.Labels
	metrics  *statemetrics.MRStateMetrics
	interval time.Duration
	log      logging.Logger
}

func newStateRecorder(c client.Reader, gvk schema.GroupVersionKind, newList func() resource.ManagedList, m *statemetrics.MRStateMetrics, interval time.Duration, log logging.Logger) *stateRecorder {
	// The label crossplane-runtime's recorder gives: the GVK as a string.
	return &stateRecorder{cache: c, newList: newList, labels: prometheus.Labels{"gvk": gvk.String()}, metrics: m, interval: interval, log: log}
}

// Start records the state every interval until ctx is done.
func (r *stateRecorder) Start(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := r.record(ctx); err != nil {
				r.log.Info("Cannot record managed resource state metrics; trying again at the next interval", "error", err.Error())
			}
		}
	}
}

// record counts the cached resources. The list shares the cache's objects
// (UnsafeDisableDeepCopy): it is only read, and dropped when record returns.
func (r *stateRecorder) record(ctx context.Context) error {
	l := r.newList()
	if err := r.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return errors.Wrap(err, "cannot list managed resources")
	}
	var exists, ready, synced float64
	for _, mg := range l.GetItems() {
		exists++
		if mg.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
			ready++
		}
		if mg.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue {
			synced++
		}
	}
	r.metrics.Exists.With(r.labels).Set(exists)
	r.metrics.Ready.With(r.labels).Set(ready)
	r.metrics.Synced.With(r.labels).Set(synced)
	return nil
}
