package conversionwebhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/widgetco/crossplane-widget/apis"
)

// startWebhook serves the conversion webhook as the provider does -
// NewServer(o) on a free loopback port, /convert registered by Setup - and
// returns its address and a pool that trusts its certificate.
func startWebhook(t *testing.T, o ServerOptions, opts ...Option) (string, *x509.CertPool) {
	t.Helper()
	o.CertDir = t.TempDir()
	cert := writeCert(t, o.CertDir)
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	o.Host, o.Port = "127.0.0.1", freePort(t)

	s := k8sruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	srv := NewServer(o)
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: s, WebhookServer: srv, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, opts...); err != nil {
		t.Fatalf("Setup(): %v", err)
	}
	serve(t, srv)
	return net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), pool
}

// apiServerClient calls the webhook as kube-apiserver does: HTTP/2 over
// TLS, giving up after 30 seconds. A non-empty from is the loopback address
// its connections come from.
func apiServerClient(pool *x509.CertPool, from string) *http.Client {
	d := &net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
		ForceAttemptHTTP2: true,
		DialContext:       d.DialContext,
	}}
}

// convertOne posts a ConversionReview of one Widget, as kube-apiserver
// sends, and returns the response's status code.
func convertOne(ctx context.Context, c *http.Client, addr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/convert", strings.NewReader(reviewHead+reviewTail))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer rsp.Body.Close()
	_, _ = io.Copy(io.Discard, rsp.Body)
	return rsp.StatusCode, nil
}

// slowUpload opens a connection from nobody in particular and posts a
// review whose 4 KiB body it sends one byte a second. It returns when the
// server closes the connection (or answers), or when ctx is done, and says
// how long the server let it last.
func slowUpload(ctx context.Context, addr string, pool *x509.CertPool) (time.Duration, error) {
	start := time.Now()
	c, err := (&tls.Dialer{Config: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}}}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /convert HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"); err != nil {
		return 0, err
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, c)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ended:
			return time.Since(start), nil
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-tick.C:
			if _, err := io.WriteString(c, " "); err != nil {
				<-ended
				return time.Since(start), nil
			}
		}
	}
}

// TestSlowUploads reproduces four anonymous clients that post reviews one
// byte a second while kube-apiserver sends eight conversions: every one of
// kube-apiserver's must be converted, and the slow uploads must be cut off
// well before the server's whole-request ReadTimeout.
func TestSlowUploads(t *testing.T) {
	addr, pool := startWebhook(t, ServerOptions{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slowStart := time.Now()
	const slow = 4
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		lasts []time.Duration
	)
	for range slow {
		wg.Go(func() {
			d, err := slowUpload(ctx, addr, pool)
			if err != nil {
				d = -1 // Still sending when the test ended.
			}
			mu.Lock()
			lasts = append(lasts, d)
			mu.Unlock()
		})
	}
	// Let the server read the slow requests' headers.
	time.Sleep(500 * time.Millisecond)

	c := apiServerClient(pool, "127.0.0.3")
	codes := make([]string, 8)
	start := time.Now()
	var legit sync.WaitGroup
	for i := range codes {
		legit.Go(func() {
			code, err := convertOne(ctx, c, addr)
			codes[i] = strconv.Itoa(code)
			if err != nil {
				codes[i] = err.Error()
			}
		})
	}
	legit.Wait()
	failed := 0
	for _, code := range codes {
		if code != "200" {
			failed++
		}
	}
	t.Logf("%d of %d conversions failed while %d clients uploaded slowly (%v): %v", failed, len(codes), slow, time.Since(start).Round(time.Millisecond), codes)
	if diff := cmp.Diff([]string{"200", "200", "200", "200", "200", "200", "200", "200"}, codes); diff != "" {
		t.Errorf("kube-apiserver's conversions while %d clients upload one byte a second: -want, +got:\n%s", slow, diff)
	}

	// The server's ReadTimeout is 15 s: the slow uploads must end sooner.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(slowStart.Add(10 * time.Second))):
		cancel()
		<-done
	}
	t.Logf("slow uploads lasted %v (-1: still open after 10 s)", lasts)
	for _, d := range lasts {
		if d < 0 {
			t.Errorf("a client that sends its body one byte a second: want the server to end it within 10 s, it was still open")
		}
	}
}

// TestSilentConnectionsFromOneAddress opens as many connections as the
// server serves at once, all from one address, and then converts from
// another address: the one address must be served only its share of the
// connections, and the conversion at once.
func TestSilentConnectionsFromOneAddress(t *testing.T) {
	// 127.0.0.2 and 127.0.0.3 are loopback addresses like 127.0.0.1: Linux
	// routes all of 127/8 to lo, so each stands for a different client.
	addr, pool := startWebhook(t, ServerOptions{})

	// Each connection completes its TLS handshake if the server serves it,
	// and then sends nothing.
	d := &tls.Dialer{
		NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}},
		Config:    &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		served int
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for range DefaultMaxConnections {
		wg.Go(func() {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			mu.Lock()
			served++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("127.0.0.2 opened %d connections, %d were served", DefaultMaxConnections, served)
	if diff := cmp.Diff("8 served", fmt.Sprintf("%d served", served)); diff != "" {
		t.Errorf("connections from one address the server serves at once: -want, +got:\n%s", diff)
	}

	cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer ccancel()
	start := time.Now()
	code, err := convertOne(cctx, apiServerClient(pool, "127.0.0.3"), addr)
	got := strconv.Itoa(code)
	if err != nil {
		got = err.Error()
	}
	t.Logf("conversion from another address while 127.0.0.2 holds its connections: %s after %v", got, time.Since(start).Round(time.Millisecond))
	if diff := cmp.Diff("200", got); diff != "" {
		t.Errorf("a conversion while one address holds %d silent connections: -want, +got:\n%s", DefaultMaxConnections, diff)
	}
}

// TestConversionBurst sends 32 conversions at once from a client with no
// connection yet, as kube-apiserver does after the provider restarts: the
// client dials a connection for each, more than one address's share, and
// every conversion must be served.
func TestConversionBurst(t *testing.T) {
	addr, pool := startWebhook(t, ServerOptions{})
	c := apiServerClient(pool, "127.0.0.3")
	t.Cleanup(c.CloseIdleConnections)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	codes := make([]string, 32)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			code, err := convertOne(ctx, c, addr)
			codes[i] = strconv.Itoa(code)
			if err != nil {
				codes[i] = err.Error()
			}
		})
	}
	wg.Wait()
	failed := []string{}
	for _, code := range codes {
		if code != "200" {
			failed = append(failed, code)
		}
	}
	if diff := cmp.Diff([]string{}, failed); diff != "" {
		t.Errorf("32 conversions at once from one new client: failures: -want, +got:\n%s", diff)
	}
}
