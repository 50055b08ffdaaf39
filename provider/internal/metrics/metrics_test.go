package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestRegister(t *testing.T) {
	cases := map[string]struct {
		reason  string
		reg     func(t *testing.T, m *Metrics) prometheus.Registerer
		wantErr bool
	}{
		"Fresh": {
			reason: "Every metric registers with an empty registry.",
			reg:    func(*testing.T, *Metrics) prometheus.Registerer { return prometheus.NewRegistry() },
		},
		"Twice": {
			reason: "Registering the same metrics twice is an error, not a panic.",
			reg: func(t *testing.T, m *Metrics) prometheus.Registerer {
				t.Helper()
				r := prometheus.NewRegistry()
				if err := m.Register(r); err != nil {
					t.Fatalf("first Register: %v", err)
				}
				return r
			},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New()
			err := m.Register(tc.reg(t, m))
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nRegister(...): got error %v, want error %t", tc.reason, err, tc.wantErr)
			}
		})
	}
}

func TestObserveAPI(t *testing.T) {
	m := New()
	m.ObserveAPI("get widget", 200, 3*time.Millisecond)
	m.ObserveAPI("get widget", 200, 5*time.Millisecond)
	m.ObserveAPI("get widget", 429, time.Millisecond)
	m.ObserveAPI("create widget", 0, time.Second)

	cases := map[string]struct {
		reason string
		metric prometheus.Metric
		want   float64
	}{
		"Successes":  {"Calls are counted by operation and status code.", m.APIRequests.WithLabelValues("get widget", "200"), 2},
		"Throttled":  {"A 429 is its own series.", m.APIRequests.WithLabelValues("get widget", "429"), 1},
		"NoResponse": {"A call without a response counts under code 0.", m.APIRequests.WithLabelValues("create widget", "0"), 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got dto.Metric
			if err := tc.metric.Write(&got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.GetCounter().GetValue()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}

	var h dto.Metric
	if err := m.APILatency.WithLabelValues("get widget").(prometheus.Histogram).Write(&h); err != nil {
		t.Fatal(err)
	}
	if got := h.GetHistogram().GetSampleCount(); got != 3 {
		t.Errorf("latency observations of get widget: want 3, got %d", got)
	}
}
