package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// serveConns runs the reference server the way cmd/widget-api does, on its
// HTTPServer and LimitListener, and returns its address. There is no
// contract checker in front: it buffers whole responses, which would hide
// what happens to connections.
func serveConns(t *testing.T, mod func(*server.Options)) string {
	t.Helper()
	o := server.Options{DataDir: t.TempDir(), Tokens: map[string]string{apitest.TokenA: apitest.ProjectA}}
	mod(&o)
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.HTTPServer()
	go func() { _ = hs.Serve(s.LimitListener(ln)) }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := s.Close(); err != nil {
			t.Errorf("cannot close server: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// healthz sends GET /healthz on a keep-alive connection and returns the
// status.
func healthz(t *testing.T, c net.Conn, r *bufio.Reader) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: widgets\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	rsp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rsp.Body)
	_ = rsp.Body.Close()
	return rsp.StatusCode
}

// TestReadTimeoutCutsOffTrickledBody: a client that sends its body a byte at
// a time cannot hold a request open past the read timeout, and its request
// does not take effect.
func TestReadTimeoutCutsOffTrickledBody(t *testing.T) {
	addr := serveConns(t, func(o *server.Options) {
		o.ReadHeaderTimeout = 300 * time.Millisecond
		o.ReadTimeout = 300 * time.Millisecond
	})
	c := dial(t, addr)
	body := `{"name":"trickled"}` + strings.Repeat(" ", 4000)
	fmt.Fprintf(c, "POST /v1/widgets HTTP/1.1\r\nHost: widgets\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", apitest.TokenA, len(body))

	type answer struct {
		status int
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		rsp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		_ = rsp.Body.Close()
		answered <- answer{status: rsp.StatusCode}
	}()
	// Trickle for up to 30s (the body would take 200s); the server should
	// give up long before.
	giveUp := time.After(30 * time.Second)
	var got answer
trickle:
	for i := 0; ; i++ {
		select {
		case got = <-answered:
			break trickle
		case <-giveUp:
			t.Fatal("the server was still reading a trickled body after 30s")
		case <-time.After(50 * time.Millisecond):
		}
		if i < len(body) {
			_, _ = c.Write([]byte{body[i]}) // fails once the server has hung up
		}
	}
	if got.err == nil && got.status != http.StatusBadRequest {
		t.Errorf("trickled body: answered %d, want 400 or a dropped connection", got.status)
	}

	cl, err := widgetapi.New("http://"+addr, widgetapi.WithToken(apitest.TokenA))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetWidget(ctx(t), "trickled"); !widgetapi.IsNotFound(err) {
		t.Errorf("the trickled create took effect: GetWidget error %v, want not found", err)
	}
}

// TestIdleTimeoutClosesConnections: keep-alive connections that send
// nothing more are closed by the server.
func TestIdleTimeoutClosesConnections(t *testing.T) {
	addr := serveConns(t, func(o *server.Options) {
		o.IdleTimeout = 300 * time.Millisecond
		o.ReadTimeout = -1 // so that only the idle timeout can close them
	})
	const n = 20
	closed := 0
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, addr)
		if got := healthz(t, conns[i], bufio.NewReader(conns[i])); got != http.StatusOK {
			t.Fatalf("healthz: %d", got)
		}
	}
	deadline := time.Now().Add(30 * time.Second) // for all of them together
	for _, c := range conns {
		_ = c.SetReadDeadline(deadline)
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closed++
		}
	}
	if closed != n {
		t.Errorf("%d of %d idle connections closed by the server within 30s, want all", closed, n)
	}
}

// TestMaxConnsMakesFurtherConnectionsWait: past the connection limit a new
// connection is not served until an open one closes.
func TestMaxConnsMakesFurtherConnectionsWait(t *testing.T) {
	addr := serveConns(t, func(o *server.Options) { o.MaxConns = 2 })
	a, b := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{a, b} {
		if got := healthz(t, c, bufio.NewReader(c)); got != http.StatusOK {
			t.Fatalf("healthz within the limit: %d", got)
		}
	}

	third := dial(t, addr)
	if _, err := io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: widgets\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = third.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := third.Read(make([]byte, 1)); n > 0 || !isTimeout(err) {
		t.Fatalf("third connection with two open and a limit of 2: read %d bytes, %v; want no answer yet", n, err)
	}

	_ = a.Close()
	_ = third.SetReadDeadline(time.Now().Add(30 * time.Second))
	rsp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("third connection once one closed: %v, want an answer", err)
	}
	_ = rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		t.Errorf("third connection once one closed: %d, want 200", rsp.StatusCode)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestLongPollOutlivesTimeouts: a change feed long poll is held past the
// read and write timeouts and still answers.
func TestLongPollOutlivesTimeouts(t *testing.T) {
	cases := map[string]struct {
		reason string
		change bool
		want   []string
	}{
		"ChangeArrives": {
			reason: "a change after both timeouts have passed is delivered",
			change: true,
			want:   []string{"widget.created late"},
		},
		"WaitEnds": {
			reason: "a wait that ends after both timeouts is answered, empty",
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			addr := serveConns(t, func(o *server.Options) {
				o.ReadTimeout = 300 * time.Millisecond
				o.WriteTimeout = 300 * time.Millisecond
				o.MaxWait = 2 * time.Second
				o.ProvisionDelay = time.Hour
			})
			c, err := widgetapi.New("http://"+addr, widgetapi.WithToken(apitest.TokenA), widgetapi.WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				l   *widgetapi.ChangeList
				err error
			}
			polled := make(chan answer, 1)
			go func() {
				l, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: 0, Wait: 30 * time.Second})
				polled <- answer{l, err}
			}()
			time.Sleep(time.Second) // past both timeouts
			if tc.change {
				if _, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "late"}); err != nil {
					t.Fatal(err)
				}
			}
			var got answer
			select {
			case got = <-polled:
			case <-time.After(30 * time.Second):
				t.Fatal("the long poll did not answer within 30s")
			}
			if got.err != nil {
				t.Fatalf("%s: long poll failed: %v", tc.reason, got.err)
			}
			var changes []string
			for _, ch := range got.l.Changes {
				changes = append(changes, string(ch.Type)+" "+ch.Widget)
			}
			if diff := cmp.Diff(tc.want, changes); diff != "" {
				t.Errorf("%s: changes -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
