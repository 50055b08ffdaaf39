//go:build linux

package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	fnv1beta1 "github.com/crossplane/function-sdk-go/proto/v1beta1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// fnServer is a composition function served on loopback with --insecure.
type fnServer struct {
	name string
	cmd  *exec.Cmd
	conn *grpc.ClientConn
}

func startFunction(t *testing.T, name, bin string, extra ...string) *fnServer {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"--insecure", "--address", addr}, extra...)
	// Not CommandContext: the cleanup below ends the function's process
	// group with SIGTERM; a context would SIGKILL the leader alone first.
	cmd := exec.Command(bin, args...) //nolint:noctx // see above
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Stdout and Stderr stay nil, so the functions' logs go straight to
	// /dev/null rather than through a pipe that this process copies: P&T
	// logs two lines per call.
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := &fnServer{name: name, cmd: cmd, conn: conn}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Any answer but Unavailable (v1beta1-only P&T says Unimplemented)
		// means the server is up.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := fnv1.NewFunctionRunnerServiceClient(conn).RunFunction(ctx, &fnv1.RunFunctionRequest{Observed: &fnv1.State{}})
		cancel()
		if status.Code(err) != codes.Unavailable {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start serving at %s: %v", name, addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A target is a function and the request it gets in a scenario.
type target struct {
	name string
	// call sends the request once; check tells what it returned.
	call  func(ctx context.Context) error
	check func(ctx context.Context) (*fnv1.RunFunctionResponse, error)
}

// v1Target calls s with the v1 RPC, as Crossplane v2 does.
func v1Target(s *fnServer, req *fnv1.RunFunctionRequest) target {
	c := fnv1.NewFunctionRunnerServiceClient(s.conn)
	return target{
		name: s.name,
		call: func(ctx context.Context) error {
			_, err := c.RunFunction(ctx, req)
			return err
		},
		check: func(ctx context.Context) (*fnv1.RunFunctionResponse, error) { return c.RunFunction(ctx, req) },
	}
}

// betaTarget calls s with the v1beta1 RPC, the request converted once by a
// protobuf round trip, as Crossplane v2 does for a function that does not
// implement v1.
func betaTarget(t *testing.T, s *fnServer, req *fnv1.RunFunctionRequest) target {
	t.Helper()
	breq := &fnv1beta1.RunFunctionRequest{}
	convert(t, req, breq)
	c := fnv1beta1.NewFunctionRunnerServiceClient(s.conn)
	return target{
		name: s.name,
		call: func(ctx context.Context) error {
			_, err := c.RunFunction(ctx, breq)
			return err
		},
		check: func(ctx context.Context) (*fnv1.RunFunctionResponse, error) {
			brsp, err := c.RunFunction(ctx, breq)
			if err != nil {
				return nil, err
			}
			rsp := &fnv1.RunFunctionResponse{}
			convert(t, brsp, rsp)
			return rsp, nil
		},
	}
}

// convert copies a message into one of the other protocol version, which
// has the same fields.
func convert(t *testing.T, from, to proto.Message) {
	t.Helper()
	b, err := proto.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, to); err != nil {
		t.Fatal(err)
	}
}

// targetResult is one target's latencies in a scenario.
type targetResult struct {
	name              string
	p50s, p99s        []time.Duration // per round
	p50, p99          time.Duration   // medians of the rounds'
	desiredNames      []string        // of its response, sorted
	desired           int             // len(desiredNames)
	warnings, normals int             // results in its response
}

// grpcResult is one scenario served by every target.
type grpcResult struct {
	scenario string
	calls    int
	targets  []*targetResult
}

// benchGRPC checks every target's response, warms them up, then measures
// rounds of calls calls each, one at a time, alternating which target
// goes first.
func benchGRPC(t *testing.T, scenario string, calls, rounds int, targets ...target) grpcResult {
	t.Helper()
	ctx := context.Background()
	r := grpcResult{scenario: scenario, calls: calls}
	for _, tg := range targets {
		rsp, err := tg.check(ctx)
		if err != nil {
			t.Fatalf("%s, %s: %v", tg.name, scenario, err)
		}
		tr := &targetResult{name: tg.name, desired: len(rsp.GetDesired().GetResources())}
		for n := range rsp.GetDesired().GetResources() {
			tr.desiredNames = append(tr.desiredNames, n)
		}
		slices.Sort(tr.desiredNames)
		for _, res := range rsp.GetResults() {
			switch res.GetSeverity() {
			case fnv1.Severity_SEVERITY_FATAL:
				t.Fatalf("%s, %s: fatal result: %s", tg.name, scenario, res.GetMessage())
			case fnv1.Severity_SEVERITY_WARNING:
				tr.warnings++
				t.Logf("%s, %s: warning: %s", tg.name, scenario, res.GetMessage())
			default:
				tr.normals++
			}
		}
		r.targets = append(r.targets, tr)
	}
	// The first two targets are function-widget and its peer: they must
	// compose as many resources.
	if a, b := r.targets[0], r.targets[1]; a.desired != b.desired {
		t.Fatalf("%s: %s composes %d resources %v, %s %d %v", scenario, a.name, a.desired, a.desiredNames, b.name, b.desired, b.desiredNames)
	}
	for _, tr := range r.targets {
		t.Logf("%s, %s: desired %v, %d warning and %d normal results", scenario, tr.name, tr.desiredNames, tr.warnings, tr.normals)
	}

	for range 200 { // warm up
		for _, tg := range targets {
			if err := tg.call(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range rounds {
		lat := make([][]time.Duration, len(targets))
		for i := range calls {
			for j := range targets {
				k := (i + j) % len(targets) // alternate who goes first
				start := time.Now()
				if err := targets[k].call(ctx); err != nil {
					t.Fatalf("%s, %s: %v", targets[k].name, scenario, err)
				}
				lat[k] = append(lat[k], time.Since(start))
			}
		}
		for k, tr := range r.targets {
			tr.p50s = append(tr.p50s, quantile(lat[k], 0.50))
			tr.p99s = append(tr.p99s, quantile(lat[k], 0.99))
		}
	}
	for _, tr := range r.targets {
		tr.p50, tr.p99 = medianD(tr.p50s), medianD(tr.p99s)
	}
	return r
}

// roundsOf formats a target's per-round p50/p99 in microseconds.
func roundsOf(tr *targetResult) string {
	parts := make([]string, len(tr.p50s))
	for i := range tr.p50s {
		parts[i] = fmt.Sprintf("%.0f/%.0f", float64(tr.p50s[i])/1e3, float64(tr.p99s[i])/1e3)
	}
	return strings.Join(parts, ", ")
}
