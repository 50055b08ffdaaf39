package server_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// syncBuffer is a log sink the server's goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// send makes one request with whatever method, path and User-Agent, and
// drains the answer.
func send(t *testing.T, env *apitest.Env, method, path, ua string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", ua)
	rsp, err := env.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rsp.Body)
	_ = rsp.Body.Close()
}

// madeUp returns n distinct made-up methods of at least size bytes.
func madeUp(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("X%0*d", size, i)
	}
	return out
}

// TestMetricsMethodLabelIsBounded: clients cannot mint metrics label values
// (time series) by making up HTTP methods.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	cases := map[string]struct {
		reason  string
		methods []string
		want    []string
	}{
		"Standard": {
			reason:  "standard methods are their own label value",
			methods: []string{"GET", "DELETE", "OPTIONS"},
			want:    []string{"DELETE", "GET", "OPTIONS"},
		},
		"CaseMatters": {
			reason:  "methods are case-sensitive: get is not GET",
			methods: []string{"get", "Get"},
			want:    []string{"other"},
		},
		"ManyMadeUp": {
			reason:  "a thousand made-up methods share one label value",
			methods: madeUp(1000, 8),
			want:    []string{"other"},
		},
		"HugeMadeUp": {
			reason:  "200 KB methods share it too",
			methods: madeUp(5, 200<<10),
			want:    []string{"other"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			for _, m := range tc.methods {
				send(t, env, m, "/healthz", "test")
			}
			mfs, err := env.Server.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range mfs {
				if mf.GetName() != "widgetapi_requests_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "method" && !slices.Contains(got, l.GetValue()) {
							got = append(got, l.GetValue())
						}
					}
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: method label values -want, +got:\n%s", tc.reason, diff)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, env.URL+"/metrics", http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			rsp, err := env.HTTP.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer rsp.Body.Close()
			body, _ := io.ReadAll(rsp.Body)
			if len(body) > 16<<10 {
				t.Errorf("%s: /metrics is %d bytes, want at most 16 KiB", tc.reason, len(body))
			}
		})
	}
}

// TestAccessLogLinesAreBounded: whatever a client sends, an access log line
// stays short; what it repeats from the request is clipped with "…".
func TestAccessLogLinesAreBounded(t *testing.T) {
	logs := &syncBuffer{}
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}))
	huge := 100 << 10
	send(t, env, strings.Repeat("M", huge), "/"+strings.Repeat("p", huge), strings.Repeat("u", huge))

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one access log line, got %d", len(lines))
	}
	line := lines[0]
	shown := line[:min(len(line), 600)]
	if len(line) > 1024 {
		t.Errorf("access log line is %d bytes, want at most 1 KiB", len(line))
	}
	for _, want := range []string{
		"method=" + strings.Repeat("M", 29) + "…",
		"path=/" + strings.Repeat("p", 252) + "…",
		"user_agent=" + strings.Repeat("u", 253) + "…",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("access log line lacks the clipped value %.20s…(%d bytes):\n%s", want, len(want), shown)
		}
	}
}

// TestAccessLogNamesCreatedWidgets: a create's path does not name its
// widget, so its access log line does - every create, whatever its outcome.
func TestAccessLogNamesCreatedWidgets(t *testing.T) {
	logs := &syncBuffer{}
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}))
	c := env.Client(t, apitest.TokenA)
	for range 2 {
		_, _ = c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "logged"})
	}
	send(t, env, http.MethodGet, "/v1/widgets/logged", "ua")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(line, "msg=request") || !strings.Contains(line, "widget=logged") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "status=") {
				got = append(got, f)
			}
		}
	}
	if diff := cmp.Diff([]string{"status=201", "status=409"}, got); diff != "" {
		t.Errorf("access log lines naming widget \"logged\": -want +got:\n%s", diff)
	}
}
