package mrsetup

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// listerFunc is a client.Reader whose List is fn.
type listerFunc func(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error

func (f listerFunc) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return nil
}

func (f listerFunc) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return f(ctx, l, opts...)
}

func TestStateRecorder(t *testing.T) {
	named := func(name string, cs ...xpv2.Condition) nsv1beta1.Widget {
		w := newWidget("uid-"+name, "1")
		w.SetName(name)
		w.SetConditions(cs...)
		return *w
	}
	type want struct {
		exists, ready, synced float64
		err                   error
		noCopies              bool
	}
	cases := map[string]struct {
		reason string
		items  []nsv1beta1.Widget
		err    error
		want   want
	}{
		"Counts": {
			reason: "Every resource exists; those with Ready=True and Synced=True are counted apart, from cached objects that are not copied.",
			items: []nsv1beta1.Widget{
				named("a", xpv2.Available(), xpv2.ReconcileSuccess()),
				named("b", xpv2.Creating(), xpv2.ReconcileSuccess()),
				named("c", xpv2.Available(), xpv2.ReconcileError(errBoom)),
				named("d"),
			},
			want: want{exists: 4, ready: 2, synced: 2, noCopies: true},
		},
		"None": {
			reason: "No resources: all zero.",
			want:   want{noCopies: true},
		},
		"ListFailed": {
			reason: "A failed list is an error and leaves the metrics as they were.",
			err:    errBoom,
			want:   want{err: errBoom},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var noCopies bool
			c := listerFunc(func(_ context.Context, l client.ObjectList, opts ...client.ListOption) error {
				lo := &client.ListOptions{}
				lo.ApplyOptions(opts)
				noCopies = lo.UnsafeDisableDeepCopy != nil && *lo.UnsafeDisableDeepCopy
				if tc.err != nil {
					return tc.err
				}
				l.(*nsv1beta1.WidgetList).Items = tc.items
				return nil
			})
			m := statemetrics.NewMRStateMetrics()
			r := newStateRecorder(c, nsv1beta1.WidgetGroupVersionKind, func() resource.ManagedList { return &nsv1beta1.WidgetList{} }, m, 0, logging.NewNopLogger())
			err := r.record(t.Context())
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nrecord(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if noCopies != tc.want.noCopies && tc.err == nil {
				t.Errorf("%s\nlisted with UnsafeDisableDeepCopy: want %t, got %t", tc.reason, tc.want.noCopies, noCopies)
			}
			label := "widget.m.widgetco.io/v1beta1, Kind=Widget"
			got := want{
				exists: gauge(t, m.Exists.WithLabelValues(label)),
				ready:  gauge(t, m.Ready.WithLabelValues(label)),
				synced: gauge(t, m.Synced.WithLabelValues(label)),
			}
			wantGauges := tc.want
			wantGauges.err, wantGauges.noCopies = nil, false
			if diff := cmp.Diff(wantGauges, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nmetrics: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
