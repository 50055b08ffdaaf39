package fn

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeRunner is a FunctionRunnerServiceServer whose RunFunction is RunFn.
type fakeRunner struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	RunFn func(context.Context, *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error)
}

func (f *fakeRunner) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	return f.RunFn(ctx, req)
}

// serveGRPC serves s over gRPC on a loopback port, as function.Serve does
// (grpc-go, no recovering interceptor), and returns a client of it.
func serveGRPC(t *testing.T, s fnv1.FunctionRunnerServiceServer) fnv1.FunctionRunnerServiceClient {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fnv1.RegisterFunctionRunnerServiceServer(srv, s)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return fnv1.NewFunctionRunnerServiceClient(conn)
}

// TestRecover serves a runner that panics on its first call behind Recover:
// that call must end with a Fatal result that holds no trace of the panic,
// counted once, and the next call must be served by the same process.
func TestRecover(t *testing.T) {
	calls := 0
	runner := &fakeRunner{RunFn: func(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
		calls++
		if calls == 1 {
			panic("widget index 3 out of range") // as a bug would
		}
		return response.To(req, response.DefaultTTL), nil
	}}
	reg := prometheus.NewRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		logged strings.Builder
	)
	log := logging.NewLogrLogger(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged.WriteString(args + "\n")
	}, funcr.Options{}))
	c := serveGRPC(t, Recover(runner, log, m))

	xr := resource.MustStructJSON(`{"apiVersion":"platform.widgetco.io/v1alpha1","kind":"XWidget","metadata":{"namespace":"team-a","name":"web"}}`)
	req := &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "t"}, Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}}}

	got, err := c.RunFunction(context.Background(), req)
	if err != nil {
		t.Fatalf("RunFunction() that panics: want a Fatal result, got error %v", err)
	}
	want := &fnv1.RunFunctionResponse{
		Meta: &fnv1.ResponseMeta{Tag: "t", Ttl: durationpb.New(60e9)},
		Results: []*fnv1.Result{{
			Severity: fnv1.Severity_SEVERITY_FATAL,
			Message:  "function-widget hit an internal error composing this XR; this is a bug: report it to your platform team, who will find the details in function-widget's log at this time",
			Target:   fnv1.Target_TARGET_COMPOSITE.Enum(),
		}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("RunFunction() that panics: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(1.0, counterValue(t, reg, "function_widget_panics_total")); diff != "" {
		t.Errorf("function_widget_panics_total after one panic: -want, +got:\n%s", diff)
	}
	mu.Lock()
	all := logged.String()
	mu.Unlock()
	for _, s := range []string{"team-a", "web", "widget index 3 out of range", "recover_test.go"} {
		if !strings.Contains(all, s) {
			t.Errorf("the log of a panic: want it to hold %q (the XR, the panic, its stack), got:\n%s", s, all)
		}
	}

	next, err := c.RunFunction(context.Background(), req)
	if err != nil {
		t.Fatalf("RunFunction() after a panic: %v", err)
	}
	if diff := cmp.Diff(0, len(next.GetResults())); diff != "" {
		t.Errorf("RunFunction() after a panic: want it served as usual, with no result: -want, +got:\n%s", diff)
	}
}

// counterValue returns the value of the unlabelled counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather(): %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s in the registry", name)
	return 0
}
