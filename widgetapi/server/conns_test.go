package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

// dialFrom connects to addr from the loopback address ip, skipping the test
// where only 127.0.0.1 is routed to loopback (Linux routes all of 127/8).
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot connect from %s (only Linux routes all of 127/8 to loopback): %v", ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends GET path on c, with token when it is not empty, and returns the
// response (body read and closed).
// reply is what a test needs of an answer whose body get has read and
// closed.
type reply struct {
	StatusCode int
	Close      bool
}

func get(t *testing.T, c net.Conn, r *bufio.Reader, path, token string) reply {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: widgets\r\n%s\r\n", path, auth); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	rsp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rsp.Body)
	_ = rsp.Body.Close()
	return reply{StatusCode: rsp.StatusCode, Close: rsp.Close}
}

// closedWithin reports whether the server closes c (a read sees EOF or a
// reset) within d.
func closedWithin(c net.Conn, r *bufio.Reader, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := r.ReadByte()
	return err != nil && !isTimeout(err)
}

// TestRefusedAnswersCloseTheConnection: every 401 and 429 says Connection:
// close and the server closes the connection, so a client that is refused
// does not keep a connection slot for the idle timeout.
func TestRefusedAnswersCloseTheConnection(t *testing.T) {
	type want struct {
		Status int
		Close  bool
		Closed bool
	}
	cases := map[string]struct {
		reason string
		opts   func(*server.Options)
		// prime is sent first, on its own connection, with this token.
		prime string
		token string
		want  want
	}{
		"MissingToken": {
			reason: "a request without a token is 401 and its connection is closed",
			want:   want{Status: http.StatusUnauthorized, Close: true, Closed: true},
		},
		"WrongToken": {
			reason: "a request with an unknown token is 401 and its connection is closed",
			token:  "wrong",
			want:   want{Status: http.StatusUnauthorized, Close: true, Closed: true},
		},
		"AuthThrottled": {
			reason: "a request from an address that failed authentication too often is 429 and its connection is closed",
			opts:   func(o *server.Options) { o.FailedAuthRate = 0.001; o.FailedAuthBurst = 1 },
			prime:  "wrong",
			token:  apitest.TokenA,
			want:   want{Status: http.StatusTooManyRequests, Close: true, Closed: true},
		},
		"RateLimited": {
			reason: "a request over its token's rate limit is 429 and its connection is closed",
			opts:   func(o *server.Options) { o.RateLimit = 0.001; o.RateBurst = 1 },
			prime:  apitest.TokenA,
			token:  apitest.TokenA,
			want:   want{Status: http.StatusTooManyRequests, Close: true, Closed: true},
		},
		"Served": {
			reason: "a served request keeps its connection for the next one",
			token:  apitest.TokenA,
			want:   want{Status: http.StatusOK},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			addr := serveConns(t, func(o *server.Options) {
				o.IdleTimeout = time.Hour // so only the answer can close the connection
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			if tc.prime != "" {
				p := dial(t, addr)
				get(t, p, bufio.NewReader(p), "/v1/widgets", tc.prime)
			}
			c := dial(t, addr)
			r := bufio.NewReader(c)
			rsp := get(t, c, r, "/v1/widgets", tc.token)
			got := want{Status: rsp.StatusCode, Close: rsp.Close, Closed: closedWithin(c, r, 2*time.Second)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOneAddressCannotHoldEverySlot: a client address that opens many
// connections and sends nothing holds at most MaxConnsPerAddr of them; the
// rest are closed at once, so a client at another address with a valid
// token is still served.
func TestOneAddressCannotHoldEverySlot(t *testing.T) {
	const (
		maxConns = 8
		perAddr  = 3
		attack   = 24
	)
	addr := serveConns(t, func(o *server.Options) {
		o.MaxConns = maxConns
		o.MaxConnsPerAddr = perAddr
		o.LimitLoopback = true // every test client is on loopback
		// So that only the per-address cap can free a slot in time.
		o.UnauthIdleTimeout = time.Hour
		o.ReadHeaderTimeout = time.Hour
	})
	conns := make([]net.Conn, attack)
	for i := range conns {
		conns[i] = dialFrom(t, "127.0.0.2", addr)
	}

	c := dialFrom(t, "127.0.0.3", addr)
	served := make(chan int, 1)
	go func() {
		if _, err := fmt.Fprintf(c, "GET /v1/widgets HTTP/1.1\r\nHost: widgets\r\nAuthorization: Bearer %s\r\n\r\n", apitest.TokenA); err != nil {
			served <- 0
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		rsp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			served <- 0
			return
		}
		_ = rsp.Body.Close()
		served <- rsp.StatusCode
	}()
	if got := <-served; got != http.StatusOK {
		t.Errorf("valid client at another address while %d connections from one address send nothing: status %d (0: no answer in 10s), want 200", attack, got)
	}

	closed := 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, a := range conns {
		wg.Go(func() {
			if closedWithin(a, bufio.NewReader(a), 2*time.Second) {
				mu.Lock()
				closed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if closed != attack-perAddr {
		t.Errorf("%d of %d connections from one address closed by the server, want %d (all but MaxConnsPerAddr)", closed, attack, attack-perAddr)
	}
}

// TestUnauthenticatedConnectionsIdleBriefly: a connection that has not
// authenticated a request is closed after UnauthIdleTimeout without one; a
// connection that has is kept for IdleTimeout.
func TestUnauthenticatedConnectionsIdleBriefly(t *testing.T) {
	cases := map[string]struct {
		reason string
		path   string // first request, if any
		token  string
		want   bool // closed within 2s
	}{
		"NoRequest": {
			reason: "a connection that sends nothing is closed after the short timeout",
			want:   true,
		},
		"Unauthenticated": {
			reason: "a connection whose requests need no token (/healthz) is closed after the short timeout",
			path:   "/healthz",
			want:   true,
		},
		"Authenticated": {
			reason: "a connection that authenticated a request is kept for the idle timeout",
			path:   "/v1/widgets",
			token:  apitest.TokenA,
			want:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			addr := serveConns(t, func(o *server.Options) {
				o.UnauthIdleTimeout = 200 * time.Millisecond
				o.IdleTimeout = time.Hour
				o.ReadHeaderTimeout = time.Hour
			})
			c := dial(t, addr)
			r := bufio.NewReader(c)
			if tc.path != "" {
				if got := get(t, c, r, tc.path, tc.token).StatusCode; got != http.StatusOK {
					t.Fatalf("GET %s: %d", tc.path, got)
				}
			}
			if got := closedWithin(c, r, 2*time.Second); got != tc.want {
				t.Errorf("%s: closed within 2s: %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

// TestLongPollsPerTokenAreCapped: a token holds at most MaxPollsPerToken
// long polls; the next is 429 with Retry-After at once, while other tokens,
// and requests that do not wait, are served.
func TestLongPollsPerTokenAreCapped(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.MaxPollsPerToken = 2
		o.MaxWait = 30 * time.Second
	}))
	poll := func(ctx context.Context, token string, wait int) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/changes?after=0&wait=%d", env.URL, wait), nil)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		req.Header.Set("Authorization", "Bearer "+token)
		rsp, err := env.HTTP.Client().Do(req)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
			return 0, ""
		}
		_, _ = io.Copy(io.Discard, rsp.Body)
		_ = rsp.Body.Close()
		return rsp.StatusCode, rsp.Header.Get("Retry-After")
	}

	held, release := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { poll(held, apitest.TokenA, 30) })
	}
	waitForGauge(t, env.Server, "widgetapi_long_polls", 2)

	type answer struct {
		Status     int
		RetryAfter string
	}
	got := make([]answer, 0, 3)
	for _, r := range []struct {
		token string
		wait  int
	}{{apitest.TokenA, 1}, {apitest.TokenB, 1}, {apitest.TokenA, 0}} {
		s, ra := poll(ctx(t), r.token, r.wait)
		got = append(got, answer{s, ra})
	}
	release()
	wg.Wait()
	waitForGauge(t, env.Server, "widgetapi_long_polls", 0)
	s, ra := poll(ctx(t), apitest.TokenA, 1)
	got = append(got, answer{s, ra})

	want := []answer{
		{http.StatusTooManyRequests, "5"}, // the token's third long poll
		{http.StatusOK, ""},               // another token's
		{http.StatusOK, ""},               // no wait: not a long poll
		{http.StatusOK, ""},               // once the held polls ended
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers with two long polls of token A held, -want, +got:\n%s", diff)
	}
}

// waitForGauge waits up to 10s for the server's gauge to read want.
func waitForGauge(t *testing.T, s *server.Server, name string, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.GetMetric()) == 1 {
				got = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if got == want {
			return
		}
	}
	t.Fatalf("%s = %v after 10s, want %v", name, got, want)
}
