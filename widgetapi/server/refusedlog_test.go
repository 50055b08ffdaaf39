package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// TestRefusedRequestsAreLoggedWithinBudget: a flood of refused requests
// writes at most RefusedLogRate access log lines a second and one summary
// line with the count it left out; served requests are all logged.
func TestRefusedRequestsAreLoggedWithinBudget(t *testing.T) {
	logs := &syncBuffer{}
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} // stands still: no budget is earned back
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.Now = clk.Now
		o.FailedAuthRate = -1 // every refusal is a 401
		o.RefusedLogRate = 5
		o.RefusedLogInterval = 50 * time.Millisecond
	}))
	const flood = 40
	for range flood {
		req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, env.URL+"/v1/widgets", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer wrong")
		rsp, err := env.HTTP.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = rsp.Body.Close()
	}
	for range 3 {
		if _, err := env.Client(t, apitest.TokenA).ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	type count struct{ Refused, Served, NotLogged int }
	var got count
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = count{}
		for _, l := range strings.Split(logs.String(), "\n") {
			switch {
			case strings.Contains(l, "msg=request") && strings.Contains(l, "status=401"):
				got.Refused++
			case strings.Contains(l, "msg=request") && strings.Contains(l, "status=200"):
				got.Served++
			case strings.Contains(l, `msg="refused requests not logged"`):
				var n int
				_, count, _ := strings.Cut(l, "count=")
				if _, err := fmt.Sscanf(count, "%d", &n); err != nil {
					t.Fatalf("summary line %q: %v", l, err)
				}
				got.NotLogged += n
			}
		}
		if got.NotLogged >= flood-5 {
			break
		}
	}
	// The summaries may come mid-flood; together they count what was left out.
	if diff := cmp.Diff(count{Refused: 5, Served: 3, NotLogged: flood - 5}, got); diff != "" {
		t.Errorf("log lines after %d refused and 3 served requests, -want, +got:\n%s", flood, diff)
	}
}

// TestConnectionErrorsAreLoggedWithinBudget: failed TLS handshakes, which
// any client can cause once per connection, are logged within the same
// budget.
func TestConnectionErrorsAreLoggedWithinBudget(t *testing.T) {
	logs := &syncBuffer{}
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := server.New(server.Options{
		DataDir:            t.TempDir(),
		Tokens:             map[string]string{apitest.TokenA: apitest.ProjectA},
		Logger:             slog.New(slog.NewTextHandler(logs, nil)),
		Now:                clk.Now,
		RefusedLogRate:     5,
		RefusedLogInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = s.HTTPServer()
	ts.StartTLS()
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})

	const flood = 30
	for range flood {
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: widgets\r\n\r\n") // not a TLS handshake
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.Copy(io.Discard, c) // until the server hangs up
		_ = c.Close()
	}
	// The server logs a handshake error after it hangs up: wait for the
	// first lines, then long enough for the rest.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(logs.String(), "TLS handshake error"); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := strings.Count(logs.String(), "TLS handshake error"); got != 5 {
		t.Errorf("%d failed TLS handshakes: %d log lines, want 5 (the budget)", flood, got)
	}
}
