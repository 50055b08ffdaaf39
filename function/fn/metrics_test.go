package fn

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeMetrics records calls to Observe.
type fakeMetrics struct {
	ObserveFn func(f Flavour, o Outcome)
}

func (m *fakeMetrics) Observe(f Flavour, o Outcome) { m.ObserveFn(f, o) }

func TestRunFunctionMetrics(t *testing.T) {
	cases := map[string]struct {
		reason  string
		flavour Flavour
		want    Outcome
	}{
		"NamespacedNew":   {reason: "A namespaced XR that is not ready yet is converging.", flavour: FlavourNamespaced, want: OutcomeConverging},
		"LegacyReady":     {reason: "A legacy XR whose widget and keys are ready is ready.", flavour: FlavourLegacy, want: OutcomeReady},
		"PolicyViolation": {reason: "An XR that violates the policy is a fatal outcome.", flavour: FlavourNamespaced, want: OutcomeFatal},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			type call struct {
				F Flavour
				O Outcome
			}
			var got []call
			f, err := NewFunction(WithMetrics(&fakeMetrics{ObserveFn: func(f Flavour, o Outcome) { got = append(got, call{f, o}) }}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.RunFunction(context.Background(), requests()[name]); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]call{{tc.flavour, tc.want}}, got); diff != "" {
				t.Errorf("%s\nObserve calls: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatalf("NewPrometheusMetrics(): %v", err)
	}
	m.Observe(FlavourLegacy, OutcomeReady)
	m.Observe(FlavourLegacy, OutcomeReady)
	m.Observe(FlavourNamespaced, OutcomeFatal)
	m.Panicked()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather(): %v", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range metric.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = metric.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"function_widget_compositions_total flavour=Legacy outcome=Ready":     2,
		"function_widget_compositions_total flavour=Namespaced outcome=Fatal": 1,
		"function_widget_panics_total":                                        1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the counters should count calls by flavour and outcome, and panics: -want, +got:\n%s", diff)
	}

	if _, err := NewPrometheusMetrics(reg); err == nil {
		t.Errorf("registering the metrics twice with one registry should fail")
	}
}
