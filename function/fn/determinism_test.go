package fn

import (
	"bytes"
	"context"
	"sync"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestRunFunctionConcurrently calls RunFunction from many goroutines at once,
// all sharing each request, and checks every response against one computed
// alone. Run with -race (make test does) it proves that RunFunction neither
// shares state between calls nor changes its request.
func TestRunFunctionConcurrently(t *testing.T) {
	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	reqs := requests()
	want := make(map[string]*fnv1.RunFunctionResponse, len(reqs))
	for name, req := range reqs {
		if want[name], err = f.RunFunction(context.Background(), proto.CloneOf(req)); err != nil {
			t.Fatalf("%s: RunFunction(): %v", name, err)
		}
	}

	const callers = 8
	type got struct {
		name string
		rsp  *fnv1.RunFunctionResponse
		err  error
	}
	out := make(chan got, callers*len(reqs))
	var wg sync.WaitGroup
	for range callers {
		for name, req := range reqs {
			wg.Go(func() {
				rsp, err := f.RunFunction(context.Background(), req)
				out <- got{name: name, rsp: rsp, err: err}
			})
		}
	}
	wg.Wait()
	close(out)

	for g := range out {
		if g.err != nil {
			t.Errorf("%s: RunFunction(): %v", g.name, g.err)
			continue
		}
		if diff := cmp.Diff(want[g.name], g.rsp, protocmp.Transform()); diff != "" {
			t.Errorf("%s: a concurrent call should answer like a call alone: -alone, +concurrent:\n%s", g.name, diff)
		}
	}
	for name, req := range reqs {
		if diff := cmp.Diff(requests()[name], req, protocmp.Transform()); diff != "" {
			t.Errorf("%s: RunFunction should not change its request: -before, +after:\n%s", name, diff)
		}
	}
}

// TestRunFunctionDeterministic calls RunFunction twice with the same request
// and requires byte-identical responses: Crossplane caches responses, and a
// response that differs between identical requests would change composed
// resources or conditions for no reason.
func TestRunFunctionDeterministic(t *testing.T) {
	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	m := proto.MarshalOptions{Deterministic: true}
	for name, req := range requests() {
		t.Run(name, func(t *testing.T) {
			var first []byte
			for i := range 2 {
				rsp, err := f.RunFunction(context.Background(), proto.CloneOf(req))
				if err != nil {
					t.Fatalf("RunFunction(): %v", err)
				}
				b, err := m.Marshal(rsp)
				if err != nil {
					t.Fatalf("Marshal(): %v", err)
				}
				if i == 0 {
					first = b
					continue
				}
				if !bytes.Equal(first, b) {
					t.Errorf("the same request should produce byte-identical responses; they differ:\n%s", cmp.Diff(first, b))
				}
			}
		})
	}
}
