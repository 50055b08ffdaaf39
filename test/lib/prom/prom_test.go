package prom

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const exposition = `# HELP widget_api_requests_total Requests.
# TYPE widget_api_requests_total counter
widget_api_requests_total{method="GET",route="/v1/widgets/{name}",code="200"} 7
widget_api_requests_total{method="POST",route="/v1/widgets",code="201"} 3
widget_api_requests_total{method="GET",route="/v1/widgets/{name}",code="404"} 2 1700000000000
weird{msg="a \"quoted\", {braced} value\n"} 1.5
up 1
broken{msg="unterminated} 3
not_a_number NaNx
`

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := Samples{
		{Series: `widget_api_requests_total{method="GET",route="/v1/widgets/{name}",code="200"}`, Name: "widget_api_requests_total",
			Labels: map[string]string{"method": "GET", "route": "/v1/widgets/{name}", "code": "200"}, Value: 7},
		{Series: `widget_api_requests_total{method="POST",route="/v1/widgets",code="201"}`, Name: "widget_api_requests_total",
			Labels: map[string]string{"method": "POST", "route": "/v1/widgets", "code": "201"}, Value: 3},
		{Series: `widget_api_requests_total{method="GET",route="/v1/widgets/{name}",code="404"}`, Name: "widget_api_requests_total",
			Labels: map[string]string{"method": "GET", "route": "/v1/widgets/{name}", "code": "404"}, Value: 2},
		{Series: `weird{msg="a \"quoted\", {braced} value\n"}`, Name: "weird",
			Labels: map[string]string{"msg": "a \"quoted\", {braced} value\n"}, Value: 1.5},
		{Series: "up", Name: "up", Labels: map[string]string{}, Value: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse(...): -want, +got:\n%s", diff)
	}
}

func TestSum(t *testing.T) {
	ss, _ := Parse(strings.NewReader(exposition))
	cases := map[string]struct {
		name  string
		match map[string]string
		want  float64
	}{
		"All":      {name: "widget_api_requests_total", want: 12},
		"OneLabel": {name: "widget_api_requests_total", match: map[string]string{"method": "GET"}, want: 9},
		"TwoLabel": {name: "widget_api_requests_total", match: map[string]string{"method": "GET", "code": "404"}, want: 2},
		"NoMatch":  {name: "widget_api_requests_total", match: map[string]string{"method": "PUT"}, want: 0},
		"Unknown":  {name: "nothing", want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ss.Sum(tc.name, tc.match); got != tc.want {
				t.Errorf("Sum(%s, %v): want %v, got %v", tc.name, tc.match, tc.want, got)
			}
		})
	}
	if !ss.Has("up") || ss.Has("down") {
		t.Errorf("Has: want up served and down not")
	}
	if got := len(ss.Of("widget_api_requests_total")); got != 3 {
		t.Errorf("Of(widget_api_requests_total): want 3 samples, got %d", got)
	}
}

func TestBy(t *testing.T) {
	ss, _ := Parse(strings.NewReader(exposition))
	want := map[string]float64{"GET": 9, "POST": 3}
	if diff := cmp.Diff(want, ss.Of("widget_api_requests_total").By("method")); diff != "" {
		t.Errorf("By(method): -want, +got:\n%s", diff)
	}
	want = map[string]float64{"": 1.5}
	if diff := cmp.Diff(want, ss.Of("weird").By("method")); diff != "" {
		t.Errorf("By(method) of samples without it: -want, +got:\n%s", diff)
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	ss, err := Scrape(t.Context(), nil, srv.URL+"/metrics")
	if err != nil || ss.Sum("up", nil) != 1 {
		t.Errorf("Scrape(/metrics): want up 1, got %v, %v", ss.Series(), err)
	}
	if _, err := Scrape(t.Context(), srv.Client(), srv.URL+"/nothing"); err == nil {
		t.Errorf("Scrape of a 404: want an error, got none")
	}
}
