package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// benchEnv serves the reference server without the contract checker, so the
// numbers are the server's own (plus loopback HTTP and the Go client).
func benchEnv(b *testing.B) *widgetapi.Client {
	b.Helper()
	s, err := server.New(server.Options{DataDir: b.TempDir(), Tokens: map[string]string{"t": "p"}})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(func() { s.Shutdown(); hs.Close(); _ = s.Close() })
	c, err := widgetapi.New(hs.URL, widgetapi.WithToken("t"), widgetapi.WithHTTPClient(hs.Client()))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkCreate measures durable (fsynced) widget creation over HTTP with
// concurrent clients.
func BenchmarkCreate(b *testing.B) {
	c := benchEnv(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("bench-%d", n.Add(1))
			if _, err := c.CreateWidget(context.Background(), widgetapi.CreateWidgetRequest{Name: name, Labels: map[string]string{"bench": "true"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkGet measures reads over HTTP with concurrent clients.
func BenchmarkGet(b *testing.B) {
	c := benchEnv(b)
	for i := range 100 {
		if _, err := c.CreateWidget(context.Background(), widgetapi.CreateWidgetRequest{Name: fmt.Sprintf("g-%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.GetWidget(context.Background(), fmt.Sprintf("g-%d", n.Add(1)%100)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
}
