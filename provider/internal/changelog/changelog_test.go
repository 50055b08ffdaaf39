package changelog

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"k8s.io/utils/ptr"

	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// sidecar is a change log service on a unix socket. With hang set it takes
// each entry and never answers, as a stuck sidecar does.
type sidecar struct {
	v1alpha1.UnimplementedChangeLogServiceServer
	hang bool

	mu      sync.Mutex
	entries []*v1alpha1.ChangeLogEntry
	// arrived gets a value for every entry received.
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

// unblock makes a hanging sidecar answer.
func (s *sidecar) unblock() { s.once.Do(func() { close(s.release) }) }

func (s *sidecar) SendChangeLog(ctx context.Context, req *v1alpha1.SendChangeLogRequest) (*v1alpha1.SendChangeLogResponse, error) {
	s.mu.Lock()
	s.entries = append(s.entries, req.GetEntry())
	s.mu.Unlock()
	s.arrived <- struct{}{}
	if s.hang {
		select {
		case <-ctx.Done():
		case <-s.release:
		}
		return nil, ctx.Err()
	}
	return &v1alpha1.SendChangeLogResponse{}, nil
}

// serve starts s on a socket in a temporary directory and returns the
// socket's path.
func serve(t *testing.T, s *sidecar) string {
	t.Helper()
	s.arrived = make(chan struct{}, 100)
	s.release = make(chan struct{})
	path := filepath.Join(t.TempDir(), "changelogs.sock")
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	v1alpha1.RegisterChangeLogServiceServer(srv, s)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		s.unblock()
		srv.Stop()
	})
	return path
}

// counts records what a Queue reports.
type counts struct {
	mu      sync.Mutex
	sent    int
	dropped map[string]int
}

func (c *counts) observe() Option {
	c.dropped = map[string]int{}
	return WithObserver(func() {
		c.mu.Lock()
		c.sent++
		c.mu.Unlock()
	}, func(reason string) {
		c.mu.Lock()
		c.dropped[reason]++
		c.mu.Unlock()
	})
}

func (c *counts) get() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := map[string]int{}
	for k, v := range c.dropped {
		d[k] = v
	}
	return c.sent, d
}

func widget(name string) *namespacedv1beta1.Widget {
	w := &namespacedv1beta1.Widget{}
	w.SetGroupVersionKind(namespacedv1beta1.WidgetGroupVersionKind)
	w.SetNamespace("team-a")
	w.SetName(name)
	w.Spec.ForProvider.Size = ptr.To("small")
	return w
}

// start runs q's sender until the test ends.
func start(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = q.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// logAll logs n updates through the stock change logger in front of q, as
// the managed reconciler does, and fails the test if they do not all return
// within a minute: a reconcile held up by the sidecar.
func logAll(t *testing.T, l managed.ChangeLogger, n int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := l.Log(context.Background(), widget("web"), v1alpha1.OperationType_OPERATION_TYPE_UPDATE, nil, managed.AdditionalDetails{"i": string(rune('a' + i%26))}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Log(...): %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Log(...) blocked: %d entries not logged after a minute; a reconcile would have waited for the sidecar", n)
	}
}

func TestHangingSidecar(t *testing.T) {
	s := &sidecar{hang: true}
	conn, err := Dial(serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &counts{}
	// A send timeout far beyond the test: the sidecar holds the first entry
	// for the whole test.
	q := NewQueue(v1alpha1.NewChangeLogServiceClient(conn), WithQueueSize(4), WithSendTimeout(time.Hour), c.observe())
	start(t, q)
	// Cleanups run last first: the sidecar answers before the sender,
	// stopping, sends what is queued.
	t.Cleanup(s.unblock)
	l := NewLogger(q, "provider-widget:test")

	// The first entry reaches the sidecar, which never answers.
	logAll(t, l, 1)
	<-s.arrived
	// 4 more fill the queue; the other 995 are dropped, and none waits.
	logAll(t, l, 999)
	sent, dropped := c.get()
	if diff := cmp.Diff(map[string]int{DroppedQueueFull: 995}, dropped); diff != "" {
		t.Errorf("With the sidecar stuck on the first entry and 4 queued, the rest are dropped as the queue is full.\ndropped: -want, +got:\n%s", diff)
	}
	if sent != 0 {
		t.Errorf("sent = %d, want 0: the sidecar answered nothing", sent)
	}
}

func TestMissingSidecar(t *testing.T) {
	conn, err := Dial(filepath.Join(t.TempDir(), "nobody-listens.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &counts{}
	q := NewQueue(v1alpha1.NewChangeLogServiceClient(conn), WithQueueSize(10), WithSendTimeout(10*time.Millisecond), c.observe())
	start(t, q)
	l := NewLogger(q, "provider-widget:test")
	logAll(t, l, 3)
	for {
		sent, dropped := c.get()
		if dropped[DroppedSendFailed] == 3 {
			if sent != 0 {
				t.Errorf("sent = %d, want 0: no sidecar listens", sent)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEntries(t *testing.T) {
	s := &sidecar{}
	conn, err := Dial(serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &counts{}
	q := NewQueue(v1alpha1.NewChangeLogServiceClient(conn), c.observe())
	start(t, q)
	l := NewLogger(q, "provider-widget:v0.3.0")
	w := widget("web")
	if err := l.Log(context.Background(), w, v1alpha1.OperationType_OPERATION_TYPE_UPDATE, nil, managed.AdditionalDetails{"cause": "drift", "diff": `size: want "small", have "large"`}); err != nil {
		t.Fatal(err)
	}
	// The reconciler goes on changing the resource: the entry keeps what
	// it was when logged.
	w.Spec.ForProvider.Size = ptr.To("large")
	<-s.arrived
	s.mu.Lock()
	e := s.entries[0]
	s.mu.Unlock()
	type entry struct {
		Provider, APIVersion, Kind, Name, Namespace, Size string
		Operation                                         v1alpha1.OperationType
		Details                                           map[string]string
	}
	snap := e.GetSnapshot().AsMap()
	md, _ := snap["metadata"].(map[string]any)
	spec, _ := snap["spec"].(map[string]any)
	fp, _ := spec["forProvider"].(map[string]any)
	got := entry{
		Provider: e.GetProvider(), APIVersion: e.GetApiVersion(), Kind: e.GetKind(), Name: e.GetName(), Operation: e.GetOperation(),
		Details: e.GetAdditionalDetails(), Namespace: md["namespace"].(string), Size: fp["size"].(string),
	}
	want := entry{
		Provider: "provider-widget:v0.3.0", APIVersion: "widget.m.widgetco.io/v1beta1", Kind: "Widget", Name: "web", Namespace: "team-a", Size: "small",
		Operation: v1alpha1.OperationType_OPERATION_TYPE_UPDATE,
		Details:   map[string]string{"cause": "drift", "diff": `size: want "small", have "large"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The sidecar gets the resource as it was logged, the operation and the details.\nentry: -want, +got:\n%s", diff)
	}
	for {
		if sent, _ := c.get(); sent == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStockLoggerWaits pins the assumption Queue exists for: crossplane-
// runtime's GRPCChangeLogger, sending straight to a sidecar that hangs,
// holds the reconcile until its send timeout (10s by default). If an
// upgrade makes it return at once, the Queue may no longer be needed.
func TestStockLoggerWaits(t *testing.T) {
	s := &sidecar{hang: true}
	conn, err := Dial(serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	const timeout = 300 * time.Millisecond
	l := managed.NewGRPCChangeLogger(v1alpha1.NewChangeLogServiceClient(conn), managed.WithSendTimeout(timeout))
	begin := time.Now()
	err = l.Log(context.Background(), widget("web"), v1alpha1.OperationType_OPERATION_TYPE_CREATE, nil, nil)
	took := time.Since(begin)
	if err == nil || took < timeout {
		t.Errorf("The stock change logger returned after %s (error %v) with the sidecar hanging; want it to wait the send timeout %s and fail", took, err, timeout)
	}
}

func TestFlushOnStop(t *testing.T) {
	s := &sidecar{}
	conn, err := Dial(serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &counts{}
	q := NewQueue(v1alpha1.NewChangeLogServiceClient(conn), c.observe())
	l := NewLogger(q, "provider-widget:test")
	// Queued before the sender starts, and the provider stops at once: the
	// sender sends them on its way out.
	logAll(t, l, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sent, dropped := c.get()
	if sent != 3 || len(dropped) != 0 {
		t.Errorf("A stopping provider sends what is queued: sent %d, dropped %v; want 3 sent, none dropped", sent, dropped)
	}
}

func TestFlushIsBounded(t *testing.T) {
	s := &sidecar{hang: true}
	conn, err := Dial(serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &counts{}
	q := NewQueue(v1alpha1.NewChangeLogServiceClient(conn), WithSendTimeout(100*time.Millisecond), c.observe())
	logAll(t, NewLogger(q, "provider-widget:test"), 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// With the sidecar hanging, stopping takes one send timeout, not one
	// per entry, and every entry is counted.
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if sent, dropped := c.get(); sent != 0 || dropped[DroppedSendFailed] != 3 {
		t.Errorf("A stopping provider with a hung sidecar drops what it cannot send in one timeout: sent %d, dropped %v; want 0 sent, 3 send_failed", sent, dropped)
	}
}
