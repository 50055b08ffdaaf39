package platform

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A ReadyLoss is one time an object that was Ready stopped being Ready.
type ReadyLoss struct {
	Name    string
	At      time.Time
	Status  string
	Reason  string
	Message string
}

// A ReadyRecorder watches the objects of one resource in one namespace and
// records every time one that was Ready stops being Ready. Objects count
// from their first Ready. It sees every change the API server sends: a
// watch, resumed after the API server goes away, not polling.
type ReadyRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	ready map[string]bool
	lost  []ReadyLoss
	err   error
}

// RecordReady starts a ReadyRecorder for resource gvr in namespace ns.
func RecordReady(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, ns string) (*ReadyRecorder, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a dynamic client")
	}
	ri := dc.Resource(gvr).Namespace(ns)
	l, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list %s in %s", gvr.Resource, ns)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &ReadyRecorder{cancel: cancel, done: make(chan struct{}), ready: map[string]bool{}}
	for i := range l.Items {
		r.observe(&l.Items[i])
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ri.Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		return nil, errors.Wrapf(err, "cannot watch %s in %s", gvr.Resource, ns)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					r.mu.Lock()
					r.err = errors.Errorf("the watch of %s in %s ended", gvr.Resource, ns)
					r.mu.Unlock()
					return
				}
				if u, ok := e.Object.(*unstructured.Unstructured); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
					r.observe(u)
				}
			}
		}
	}()
	return r, nil
}

func (r *ReadyRecorder) observe(u *unstructured.Unstructured) {
	c := GetCondition(u, "Ready")
	r.mu.Lock()
	defer r.mu.Unlock()
	ready := c.Status == "True"
	if r.ready[u.GetName()] && !ready {
		r.lost = append(r.lost, ReadyLoss{Name: u.GetName(), At: time.Now(), Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	r.ready[u.GetName()] = ready
}

// Stop stops watching and returns every loss of Ready it recorded, and an
// error if the watch ended early.
func (r *ReadyRecorder) Stop() ([]ReadyLoss, error) {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReadyLoss(nil), r.lost...), r.err
}

// Ready reports whether the named object is Ready now, as far as the
// recorder has seen.
func (r *ReadyRecorder) Ready(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready[name]
}
