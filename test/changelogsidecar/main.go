// Command changelogsidecar is the local control plane's stand-in for
// Crossplane's change logs sidecar (github.com/crossplane/changelogs-sidecar,
// image xpkg.crossplane.io/crossplane/changelogs-sidecar, whose module the
// Go module proxy here does not serve). It implements the same gRPC service,
// crossplane-runtime's changelogs.proto.v1alpha1.ChangeLogService, on a unix
// socket and, as the upstream sidecar does, writes every entry it receives
// to standard output as one line of JSON (protojson: "apiVersion",
// "operation": "OPERATION_TYPE_UPDATE", "additionalDetails", ...), where
// the pod's log collector picks it up.
//
// It lives under test/ because it is part of the test platform, not of the
// product: clusters run the upstream image (examples/runtime/changelogs.yaml),
// and the end-to-end suite runs this one in its place (test/lib/platform
// pushes it to the loopback registry and rewrites the image reference).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
)

// server writes each entry to out, one line each.
type server struct {
	v1alpha1.UnimplementedChangeLogServiceServer

	mu  sync.Mutex
	out *os.File
}

func (s *server) SendChangeLog(_ context.Context, req *v1alpha1.SendChangeLogRequest) (*v1alpha1.SendChangeLogResponse, error) {
	b, err := protojson.Marshal(req.GetEntry())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	return &v1alpha1.SendChangeLogResponse{}, nil
}

func main() {
	socket := flag.String("socket", "/var/run/changelogs/changelogs.sock", "Unix socket to listen on, on a volume shared with the provider's container.")
	flag.Parse()
	if err := run(*socket); err != nil {
		fmt.Fprintln(os.Stderr, "changelogsidecar:", err)
		os.Exit(1)
	}
}

func run(socket string) error {
	// A socket left by an earlier run of this container (the volume
	// outlives it) would make Listen fail.
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("cannot remove the old socket %s: %w", socket, err)
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "unix", socket)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", socket, err)
	}
	// The provider's container may run as another user.
	if err := os.Chmod(socket, 0o666); err != nil { //nolint:gosec // Any user of the pod may send entries.
		return fmt.Errorf("cannot make %s writable: %w", socket, err)
	}
	srv := grpc.NewServer()
	v1alpha1.RegisterChangeLogServiceServer(srv, &server{out: os.Stdout})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	fmt.Fprintln(os.Stderr, "changelogsidecar: listening on", socket)
	return srv.Serve(l)
}
