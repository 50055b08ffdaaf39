package fn

import (
	"context"
	"net"
	"net/http"
	"time"
)

// healthHandler serves /healthz (the process is up) and /readyz (the gRPC
// server accepts connections on grpcAddr) for a DeploymentRuntimeConfig's
// liveness and readiness probes. Kubernetes' own gRPC probes cannot speak
// the mutual TLS Crossplane requires, so the probes use plain HTTP on a port
// of their own.
func healthHandler(grpcAddr string) http.Handler {
	dialAddr := loopbackFor(grpcAddr)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", dialAddr)
		if err != nil {
			http.Error(w, "gRPC server not accepting connections on "+dialAddr, http.StatusServiceUnavailable)
			return
		}
		_ = c.Close()
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// loopbackFor turns a listen address such as ":9443" or "0.0.0.0:9443" into
// one to dial from the same host.
func loopbackFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// ServeHealth serves /healthz and /readyz (healthHandler) on addr until the
// process ends. grpcAddr is where the function's gRPC server listens.
func ServeHealth(addr, grpcAddr string) error {
	// The server lives as long as the process: no caller's context ends it.
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: healthHandler(grpcAddr), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return nil
}
