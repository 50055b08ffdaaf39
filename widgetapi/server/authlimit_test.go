package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// clock is a settable time source for a server.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// fromAddr returns an HTTP client whose connections come from the loopback
// address ip (Linux routes all of 127/8 to lo).
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestFailedAuthIsThrottledPerAddress: once an address has spent its
// failed-authentication burst, every request from it is 429 until it has
// waited, even with a valid short static token, while other addresses are
// unaffected. (TestThrottledAddressServesKnownCredentials covers the
// credentials a throttled address is still served with.)
func TestFailedAuthIsThrottledPerAddress(t *testing.T) {
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.Now = clk.Now
		o.FailedAuthRate = 0.5 // one attempt back every 2s
		o.FailedAuthBurst = 3
	}))
	type step struct {
		from, token string
		advance     time.Duration // of the clock, before the request
	}
	type answer struct {
		Status     int
		RetryAfter string
	}
	steps := []step{
		{from: "127.0.0.1", token: "wrong"},
		{from: "127.0.0.1", token: "wrong"},
		{from: "127.0.0.1", token: ""},
		{from: "127.0.0.1", token: "wrong"},
		{from: "127.0.0.1", token: apitest.TokenA},
		{from: "127.0.0.2", token: apitest.TokenA},
		{from: "127.0.0.2", token: "wrong"},
		{from: "127.0.0.1", token: "wrong", advance: 2 * time.Second},
		{from: "127.0.0.1", token: "wrong"},
		{from: "127.0.0.1", token: apitest.TokenA, advance: 2 * time.Second},
	}
	want := []answer{
		{401, ""},
		{401, ""},
		{401, ""}, // a missing token is a failure too
		{429, "2"},
		{429, "2"}, // a short token is throttled too
		{200, ""},  // another address has its own bucket
		{401, ""},
		{401, ""}, // two seconds earned one attempt back
		{429, "2"},
		{200, ""},
	}
	clients := map[string]*http.Client{}
	got := make([]answer, 0, len(steps))
	for _, s := range steps {
		if clients[s.from] == nil {
			clients[s.from] = fromAddr(s.from)
			t.Cleanup(clients[s.from].CloseIdleConnections)
		}
		clk.Add(s.advance)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, env.URL+"/v1/widgets", nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.token != "" {
			req.Header.Set("Authorization", "Bearer "+s.token)
		}
		rsp, err := clients[s.from].Do(req)
		if err != nil && s.from != "127.0.0.1" {
			t.Skipf("cannot connect from %s (only Linux routes all of 127/8 to loopback): %v", s.from, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, rsp.Body)
		_ = rsp.Body.Close()
		got = append(got, answer{rsp.StatusCode, rsp.Header.Get("Retry-After")})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers -want, +got:\n%s", diff)
	}
}
