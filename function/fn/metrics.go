package fn

import (
	"github.com/prometheus/client_golang/prometheus"
)

// An Outcome is how a call of the function ended for an XR.
type Outcome string

// Outcomes of a call.
const (
	// OutcomeReady means the widget and its keys are ready.
	OutcomeReady Outcome = "Ready"
	// OutcomeConverging means the function composed the XR, which is not
	// ready yet.
	OutcomeConverging Outcome = "Converging"
	// OutcomeFatal means the function could not compose the XR, for example
	// because it violates the policy.
	OutcomeFatal Outcome = "Fatal"
)

func outcomeOf(ready bool) Outcome {
	if ready {
		return OutcomeReady
	}
	return OutcomeConverging
}

// Metrics records the outcome of each call. Implementations must be safe for
// concurrent use.
type Metrics interface {
	Observe(f Flavour, o Outcome)
}

// NopMetrics records nothing.
type NopMetrics struct{}

// Observe does nothing.
func (NopMetrics) Observe(Flavour, Outcome) {}

// Panicked does nothing.
func (NopMetrics) Panicked() {}

// PrometheusMetrics counts calls by the XR's flavour and the outcome, in
// function_widget_compositions_total, and calls that panicked (see
// Recover), in function_widget_panics_total. The function SDK's gRPC
// metrics count and time the calls themselves.
type PrometheusMetrics struct {
	compositions *prometheus.CounterVec
	panics       prometheus.Counter
}

// NewPrometheusMetrics returns metrics registered with r.
func NewPrometheusMetrics(r prometheus.Registerer) (*PrometheusMetrics, error) {
	m := &PrometheusMetrics{
		compositions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "function_widget_compositions_total",
			Help: "Calls of function-widget, by the flavour of the composite resource (Namespaced, Legacy) and the outcome (Ready, Converging, Fatal).",
		}, []string{"flavour", "outcome"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "function_widget_panics_total",
			Help: "Calls of function-widget that panicked and were answered with a Fatal result. Each is a bug: the stack is in the log.",
		}),
	}
	for _, c := range []prometheus.Collector{m.compositions, m.panics} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Panicked counts one call that panicked.
func (m *PrometheusMetrics) Panicked() {
	m.panics.Inc()
}

// Observe counts one call.
func (m *PrometheusMetrics) Observe(f Flavour, o Outcome) {
	m.compositions.WithLabelValues(string(f), string(o)).Inc()
}
