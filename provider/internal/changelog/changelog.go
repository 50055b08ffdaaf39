// Package changelog sends the managed reconciler's change log entries (one
// per create, update and delete of an external resource) to the change logs
// sidecar over a unix socket, without ever holding up a reconcile.
//
// crossplane-runtime's managed.GRPCChangeLogger builds each entry (the
// resource, the operation, a snapshot of the resource before the change,
// the error if the change failed, the external client's additional details)
// and sends it synchronously, waiting for the sidecar to be ready for up to
// its send timeout (10s by default): a sidecar that is missing or slow would
// stall every reconcile that changes something. Here it sends to a Queue
// instead of the sidecar: the Queue takes the entry in constant time and a
// single sender goroutine forwards queued entries to the sidecar, each
// bounded by a timeout. An entry that finds the queue full, or that the
// sidecar does not take in time, is dropped and counted.
package changelog

import (
	"context"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/apis/changelogs/proto/v1alpha1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultSocket is where the change logs sidecar listens: the path the
// upstream sidecar and Crossplane's documentation use, on a volume shared by
// the provider's and the sidecar's containers.
const DefaultSocket = "/var/run/changelogs/changelogs.sock"

// Defaults of a Queue.
const (
	// DefaultQueueSize bounds the entries waiting for the sidecar. An entry
	// is a snapshot of one managed resource (a few KiB), so a full queue
	// holds a few MiB.
	DefaultQueueSize = 1000
	// DefaultSendTimeout bounds how long the sender waits for the sidecar
	// to take one entry, including waiting for it to listen.
	DefaultSendTimeout = 5 * time.Second
)

// Reasons an entry is dropped, the label of the dropped metric.
const (
	// DroppedQueueFull: the sidecar was slower than the changes, and the
	// queue was full.
	DroppedQueueFull = "queue_full"
	// DroppedSendFailed: the sidecar did not take the entry within the
	// send timeout, or refused it.
	DroppedSendFailed = "send_failed"
)

// An Option configures a Queue.
type Option func(*Queue)

// WithQueueSize sets how many entries may wait for the sidecar (at least 1).
func WithQueueSize(n int) Option {
	return func(q *Queue) { q.entries = make(chan *v1alpha1.SendChangeLogRequest, max(n, 1)) }
}

// WithSendTimeout sets how long the sender waits for the sidecar to take one
// entry.
func WithSendTimeout(d time.Duration) Option {
	return func(q *Queue) { q.timeout = d }
}

// WithLogger sets the logger that reports when entries start and stop being
// dropped. It never logs an entry.
func WithLogger(l logging.Logger) Option {
	return func(q *Queue) { q.log = l }
}

// WithObserver sets the functions told of every entry sent and every entry
// dropped (with its reason). Either may be nil.
func WithObserver(sent func(), dropped func(reason string)) Option {
	return func(q *Queue) {
		if sent != nil {
			q.sent = sent
		}
		if dropped != nil {
			q.dropped = dropped
		}
	}
}

// A Queue is a v1alpha1.ChangeLogServiceClient whose SendChangeLog never
// blocks: it queues the request for a sender that forwards it to the
// sidecar. Run the sender with Start (a controller-runtime Runnable).
type Queue struct {
	client  v1alpha1.ChangeLogServiceClient
	entries chan *v1alpha1.SendChangeLogRequest
	timeout time.Duration
	log     logging.Logger
	sent    func()
	dropped func(reason string)

	mu sync.Mutex
	// failing is set while entries are being dropped, so that the log says
	// so once per outage rather than once per entry.
	failing bool
}

var _ v1alpha1.ChangeLogServiceClient = &Queue{}

// NewQueue returns a queue in front of the sidecar's client c.
func NewQueue(c v1alpha1.ChangeLogServiceClient, o ...Option) *Queue {
	q := &Queue{
		client:  c,
		entries: make(chan *v1alpha1.SendChangeLogRequest, DefaultQueueSize),
		timeout: DefaultSendTimeout,
		log:     logging.NewNopLogger(),
		sent:    func() {},
		dropped: func(string) {},
	}
	for _, fn := range o {
		fn(q)
	}
	return q
}

// SendChangeLog queues req for the sidecar and returns at once. It returns
// no error when the queue is full: the entry is dropped and counted, and
// the reconcile goes on (the reconciler would only log the error, once per
// change).
func (q *Queue) SendChangeLog(_ context.Context, req *v1alpha1.SendChangeLogRequest, _ ...grpc.CallOption) (*v1alpha1.SendChangeLogResponse, error) {
	select {
	case q.entries <- req:
	default:
		q.drop(DroppedQueueFull, errors.New("the queue of change log entries is full"))
	}
	return &v1alpha1.SendChangeLogResponse{}, nil
}

// Start sends queued entries to the sidecar, one at a time, until ctx is
// done. Then it sends what is still queued, for at most the send timeout in
// all (a provider that stops records its last changes), and drops the rest:
// stopping takes at most two send timeouts.
func (q *Queue) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			q.flush(ctx)
			return nil
		case req := <-q.entries:
			// Not ctx's cancellation: an entry taken when the provider
			// starts stopping is sent like the ones flush sends.
			q.send(context.WithoutCancel(ctx), req)
		}
	}
}

// flush sends the queued entries within one send timeout; those it cannot
// send in that time are dropped. ctx is done already: only its values are
// kept.
func (q *Queue) flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.timeout)
	defer cancel()
	for {
		select {
		case req := <-q.entries:
			q.send(ctx, req)
		default:
			return
		}
	}
}

// NeedLeaderElection is false: every replica that reconciles must send.
func (q *Queue) NeedLeaderElection() bool { return false }

// send sends one entry, waiting at most the send timeout, or until ctx is
// done.
func (q *Queue) send(ctx context.Context, req *v1alpha1.SendChangeLogRequest) {
	sctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	// WaitForReady: a sidecar that starts after the provider still gets
	// the first entries, within the timeout.
	if _, err := q.client.SendChangeLog(sctx, req, grpc.WaitForReady(true)); err != nil {
		q.drop(DroppedSendFailed, err)
		return
	}
	q.sent()
	q.mu.Lock()
	recovered := q.failing
	q.failing = false
	q.mu.Unlock()
	if recovered {
		q.log.Info("Sending change log entries to the sidecar again")
	}
}

func (q *Queue) drop(reason string, err error) {
	q.dropped(reason)
	q.mu.Lock()
	first := !q.failing
	q.failing = true
	q.mu.Unlock()
	if first {
		q.log.Info("Dropping change log entries: the change logs sidecar does not take them (counted in widget_changelog_entries_dropped_total; reconciles go on)", "reason", reason, "error", err)
	}
}

// Dial returns a client of the change logs sidecar listening on the unix
// socket at path. It does not connect until the first entry is sent.
func Dial(path string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	return conn, errors.Wrapf(err, "cannot create a client of the change logs sidecar at %s", path)
}

// NewLogger returns the change logger of the managed reconcilers:
// crossplane-runtime's, sending to q, with the provider's name and version
// in every entry (e.g. "provider-widget:v0.3.0").
func NewLogger(q *Queue, provider string) managed.ChangeLogger {
	return managed.NewGRPCChangeLogger(q, managed.WithProviderVersion(provider))
}
