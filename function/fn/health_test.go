package fn

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoopbackFor(t *testing.T) {
	cases := map[string]string{
		":9443":           "127.0.0.1:9443",
		"0.0.0.0:9443":    "127.0.0.1:9443",
		"[::]:9443":       "127.0.0.1:9443",
		"127.0.0.1:9443":  "127.0.0.1:9443",
		"10.1.2.3:9443":   "10.1.2.3:9443",
		"localhost:9443":  "localhost:9443",
		"not-a-host-port": "not-a-host-port",
	}
	for in, want := range cases {
		if diff := cmp.Diff(want, loopbackFor(in)); diff != "" {
			t.Errorf("loopbackFor(%q): -want +got:\n%s", in, diff)
		}
	}
}

func TestHealthHandler(t *testing.T) {
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := l.Addr().String()
	down, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := down.Addr().String()
	_ = down.Close()
	defer l.Close()

	cases := map[string]struct {
		grpc string
		path string
		want int
	}{
		"LiveWhateverTheServer":    {grpc: closed, path: "/healthz", want: http.StatusOK},
		"ReadyWhenListening":       {grpc: up, path: "/readyz", want: http.StatusOK},
		"NotReadyWhenNotListening": {grpc: closed, path: "/readyz", want: http.StatusServiceUnavailable},
		"UnknownPath":              {grpc: up, path: "/metrics", want: http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthHandler(tc.grpc).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.want {
				t.Errorf("GET %s with gRPC at %s: status %d, want %d (%s)", tc.path, tc.grpc, rec.Code, tc.want, rec.Body)
			}
		})
	}
}
