//go:build linux

package bench

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/widgetco/crossplane-widget/test/lib/prom"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// scrape reads a Prometheus text endpoint into series -> value, a series
// being the line before its value: name{labels}.
func scrape(c *http.Client, u string) (map[string]float64, error) {
	ss, err := prom.Scrape(context.Background(), c, u)
	return ss.Series(), err
}

// promSum returns the sum of every sample of a metric served at addr, or -1
// when it cannot be read.
func promSum(addr, name string) float64 {
	ss, err := prom.Scrape(context.Background(), nil, "http://"+addr+"/metrics")
	if err != nil {
		return -1
	}
	return ss.Sum(name, nil)
}

// promSamples reads every sample of a metric served at addr (none when it
// cannot be read).
func promSamples(addr, name string) prom.Samples {
	ss, err := prom.Scrape(context.Background(), nil, "http://"+addr+"/metrics")
	if err != nil {
		return nil
	}
	return ss.Of(name)
}

// metricDelta is the difference of two scrapes of a metrics endpoint.
type metricDelta struct{ before, after map[string]float64 }

func (d metricDelta) sum(name string, match ...string) float64 {
	return metricSum(d.after, name, match...) - metricSum(d.before, name, match...)
}

func (d metricDelta) by(name, label string, match ...string) map[string]float64 {
	a, b := metricBy(d.after, name, label, match...), metricBy(d.before, name, label, match...)
	for k, v := range b {
		a[k] -= v
	}
	return a
}

// metricName is the name of a series.
func metricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// label returns a label's value in a series, or "".
func label(series, name string) string {
	i := strings.Index(series, "{"+name+`="`)
	if i < 0 {
		i = strings.Index(series, ","+name+`="`)
	}
	if i < 0 {
		return ""
	}
	rest := series[i+len(name)+3:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// metricSum sums the series of a metric whose labels contain every match.
func metricSum(m map[string]float64, name string, match ...string) float64 {
	s := 0.0
	for k, v := range m {
		if metricName(k) != name {
			continue
		}
		ok := true
		for _, mt := range match {
			ok = ok && strings.Contains(k, mt)
		}
		if ok {
			s += v
		}
	}
	return s
}

// metricBy sums the series of a metric by the value of a label.
func metricBy(m map[string]float64, name, lbl string, match ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if metricName(k) != name {
			continue
		}
		ok := true
		for _, mt := range match {
			ok = ok && strings.Contains(k, mt)
		}
		if ok {
			out[label(k, lbl)] += v
		}
	}
	return out
}

// apiserverRequests is kube-apiserver's requests by verb and resource, most
// frequent first.
func apiserverRequests(d metricDelta) []kv {
	by := map[string]float64{}
	for k, v := range d.after {
		if metricName(k) != "apiserver_request_total" {
			continue
		}
		key := label(k, "verb") + " " + label(k, "resource")
		if sr := label(k, "subresource"); sr != "" {
			key += "/" + sr
		}
		by[key] += v - d.before[k]
	}
	return sortedKeysDesc(by)
}

// widgetAPIRequests returns the Widget API server's requests
// (widgetapi_requests_total) by method and route, such as
// "GET /v1/widgets/{name}", and their total; none, and the error, when its
// registry cannot be gathered.
func widgetAPIRequests(s *server.Server) (map[string]float64, float64, error) {
	by, total := map[string]float64{}, 0.0
	mfs, err := s.Registry().Gather()
	if err != nil {
		return by, total, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "widgetapi_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			v := m.GetCounter().GetValue()
			k := l["route"]
			if !strings.HasPrefix(k, l["method"]+" ") {
				k = l["method"] + " " + k
			}
			by[k] += v
			total += v
		}
	}
	return by, total, nil
}

// apiRequests is widgetAPIRequests that fails the test when the registry
// cannot be gathered: the provider section's figures depend on it.
func apiRequests(t *testing.T, s *server.Server) (map[string]float64, float64) {
	t.Helper()
	by, total, err := widgetAPIRequests(s)
	if err != nil {
		t.Fatal(err)
	}
	return by, total
}

type kv struct {
	k string
	v float64
}

// sortedKeysDesc returns m's non-zero entries, largest first.
func sortedKeysDesc(m map[string]float64) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		if v != 0 {
			out = append(out, kv{k, v})
		}
	}
	slices.SortFunc(out, func(a, b kv) int {
		switch {
		case a.v > b.v:
			return -1
		case a.v < b.v:
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	return out
}

func topN(s []kv, n int) []kv { return s[:min(n, len(s))] }

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// TestMetricParsers checks the Prometheus parsing the e2e section relies on
// (it runs without WIDGET_BENCH).
func TestMetricParsers(t *testing.T) {
	ss, _ := prom.Parse(strings.NewReader(`# HELP x y
function_run_function_request_total{function_name="function-widget",grpc_target="dns:///127.0.0.1:1"} 12
function_run_function_request_total{function_name="other"} 3
controller_runtime_reconcile_total{controller="a",result="success"} 5
controller_runtime_reconcile_total{controller="a",result="error"} 1
controller_runtime_reconcile_total{controller="b",result="success"} 2
process_cpu_seconds_total 1.5
`))
	m := ss.Series()
	if got := metricSum(m, "function_run_function_request_total"); got != 15 {
		t.Errorf("metricSum = %v, want 15", got)
	}
	if got := metricSum(m, "function_run_function_request_total", `function_name="function-widget"`); got != 12 {
		t.Errorf("metricSum with a match = %v, want 12", got)
	}
	if got := metricBy(m, "controller_runtime_reconcile_total", "controller"); got["a"] != 6 || got["b"] != 2 {
		t.Errorf("metricBy = %v, want a=6 b=2", got)
	}
	if got := metricSum(m, "process_cpu_seconds_total"); got != 1.5 {
		t.Errorf("metricSum without labels = %v, want 1.5", got)
	}
	if got := label(`x{verb="GET",resource="widgets",subresource=""}`, "resource"); got != "widgets" {
		t.Errorf("label = %q, want widgets", got)
	}
}
