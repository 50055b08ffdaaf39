package conversionwebhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/widgetco/crossplane-widget/test/lib/testcert"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// writeCert writes a self-signed serving certificate for 127.0.0.1 to dir
// (tls.crt, tls.key) and returns it.
func writeCert(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := testcert.SelfSigned(t, "webhook", net.ParseIP("127.0.0.1"))
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // A TCP listener's address.
}

// serve runs srv until the test ends, and returns once it serves.
func serve(t *testing.T, srv webhook.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Start(): %v", err)
		}
	})
	wait.For(t, 10*time.Second, "the webhook server to serve", func() error { return srv.StartedChecker()((&http.Request{}).WithContext(t.Context())) })
}

// startServer starts NewServer(o) on a free loopback port with an /ok
// handler, and returns its address.
func startServer(t *testing.T, o ServerOptions) string {
	t.Helper()
	o.Host, o.Port = "127.0.0.1", freePort(t)
	srv := NewServer(o)
	srv.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	serve(t, srv)
	return net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
}

func get(ctx context.Context, addr string, pool *x509.CertPool) error {
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/ok", http.NoBody)
	if err != nil {
		return err
	}
	rsp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return errors.New(rsp.Status)
	}
	if rsp.ProtoMajor != 2 {
		return errors.New("served over " + rsp.Proto + ", want HTTP/2")
	}
	return nil
}

// TestServerConnections checks the server's connection bounds: a
// connection that never completes a request is closed after the header
// timeout, and connections beyond the cap wait until one closes.
func TestServerConnections(t *testing.T) {
	dir := t.TempDir()
	cert := writeCert(t, dir)
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	addr := startServer(t, ServerOptions{CertDir: dir, MaxConnections: 2, ReadHeaderTimeout: time.Second})

	if err := get(t.Context(), addr, pool); err != nil {
		t.Fatalf("GET /ok over TLS: %v", err)
	}

	// Two connections that send nothing hold both slots.
	held := make([]net.Conn, 2)
	for i := range held {
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held[i] = c
	}
	// Give the server time to accept both.
	time.Sleep(100 * time.Millisecond)
	third, err := (&tls.Dialer{NetDialer: &net.Dialer{Deadline: time.Now().Add(300 * time.Millisecond)}, Config: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}).DialContext(t.Context(), "tcp", addr)
	if err == nil {
		_ = third.Close()
		t.Errorf("a third connection while two are open: want its TLS handshake unanswered (the cap is 2), got it served")
	}

	// The server closes the silent connections after ReadHeaderTimeout.
	start := time.Now()
	for _, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a connection that sends nothing: want it closed by the server within 5s, got %v", err)
		}
	}
	t.Logf("silent connections closed after %v", time.Since(start))
	if err := get(t.Context(), addr, pool); err != nil {
		t.Errorf("GET /ok once the silent connections are closed: %v", err)
	}
}

// TestServerSlowBody sends a request whose body never arrives: the server
// must give up on it after ReadTimeout rather than hold the connection.
func TestServerSlowBody(t *testing.T) {
	dir := t.TempDir()
	cert := writeCert(t, dir)
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	addr := startServer(t, ServerOptions{CertDir: dir, ReadTimeout: 500 * time.Millisecond})

	c, err := (&tls.Dialer{Config: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}}}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("a", 10)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a request whose body stops: want the server to end it within 5s, got nothing")
	}
	t.Logf("slow request ended by the server after %v", time.Since(start))
}
