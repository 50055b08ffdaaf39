package platform

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// A Change is one write to an object (an update, or a creation after the
// recorder started) that a watch saw.
type Change struct {
	Name string
	// At is when the watch delivered the change, which under load can be
	// well after the write.
	At time.Time
	// Revision is the object's resourceVersion after the write: an etcd
	// revision, which orders it against every other write of the cluster
	// (see Revision).
	Revision int64
	// Detail is, for an Event, its involved object and reason.
	Detail string
	// Occurred is, for an Event, when it last occurred as its source
	// recorded it: a source whose event writes queue up writes them after
	// that.
	Occurred time.Time
	// Unchanged is true when the write left the object as the watch last
	// saw it but for its resourceVersion and managedFields: a new revision
	// and a watch event, and nothing a reader could act on.
	Unchanged bool
	// Fields are the paths of the fields the write changed, as far as the
	// watch saw the object before (at most maxFields): what a failure
	// report says changed.
	Fields []string
}

// maxFields bounds Change.Fields.
const maxFields = 4

// A ReadyRecorder watches the objects of one resource in one namespace and
// records every time one that was Ready stops being Ready, and every change
// to any of them. Objects count from their first Ready. It sees every
// change the API server sends: a watch, resumed after the API server goes
// away, not polling.
type ReadyRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	ready   map[string]bool
	last    map[string]map[string]any // each object as last seen, sameContent's form
	lost    []ReadyLoss
	changes []Change
	err     error
}

// RecordReady starts a ReadyRecorder for resource gvr in namespace ns ("" for
// every namespace, or a cluster-scoped resource), of the objects that
// labelSelector selects ("" for all).
func RecordReady(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, ns, labelSelector string) (*ReadyRecorder, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a dynamic client")
	}
	ri := dc.Resource(gvr).Namespace(ns)
	l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: labelSelector})
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list %s in %s", gvr.Resource, ns)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &ReadyRecorder{cancel: cancel, done: make(chan struct{}), ready: map[string]bool{}, last: map[string]map[string]any{}}
	for i := range l.Items {
		r.observe(&l.Items[i])
		r.last[l.Items[i].GetName()] = withoutRevision(l.Items[i].Object)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labelSelector
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
				u, ok := e.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				if e.Type == watch.Modified || e.Type == watch.Added {
					r.record(u, e.Type)
					r.observe(u)
				}
			}
		}
	}()
	return r, nil
}

// record records the Change that an Added or Modified event of u is.
func (r *ReadyRecorder) record(u *unstructured.Unstructured, t watch.EventType) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Change{Name: u.GetName(), At: time.Now()}
	c.Revision, _ = strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	content := withoutRevision(u.Object)
	if prev, ok := r.last[u.GetName()]; ok && t == watch.Modified {
		c.Unchanged = sameContent(prev, content)
		c.Fields = changedFields(prev, content, "", nil)
	}
	r.last[u.GetName()] = content
	if u.GetKind() == "Event" {
		kind, _, _ := unstructured.NestedString(u.Object, "involvedObject", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "involvedObject", "name")
		reason, _, _ := unstructured.NestedString(u.Object, "reason")
		c.Detail = kind + "/" + name + " " + reason
		c.Occurred = eventOccurred(u)
	}
	r.changes = append(r.changes, c)
}

// withoutRevision returns a copy of obj without metadata.resourceVersion
// and metadata.managedFields, which change with every write.
func withoutRevision(obj map[string]any) map[string]any {
	c := runtime.DeepCopyJSON(obj)
	unstructured.RemoveNestedField(c, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c, "metadata", "managedFields")
	return c
}

// changedFields appends to out the paths of the fields that differ between
// a and b (objects in withoutRevision's form, or parts of them under path),
// at most maxFields, in a stable order.
func changedFields(a, b any, path string, out []string) []string {
	if len(out) >= maxFields {
		return out
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out = changedFields(am[k], bm[k], p, out)
		}
		return out
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			out = changedFields(as[i], bs[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
		return out
	}
	if !equality.Semantic.DeepEqual(a, b) && len(out) < maxFields {
		out = append(out, path)
	}
	return out
}

// sameContent reports whether two objects in withoutRevision's form are
// the same.
func sameContent(a, b map[string]any) bool { return equality.Semantic.DeepEqual(a, b) }

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

// Lost returns every loss of Ready recorded so far.
func (r *ReadyRecorder) Lost() []ReadyLoss {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReadyLoss(nil), r.lost...)
}

// ChangesAfter returns the writes to the objects that came after the write
// of revision rev, however late the watch delivered them.
func (r *ReadyRecorder) ChangesAfter(rev int64) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Change
	for _, c := range r.changes {
		if c.Revision > rev {
			out = append(out, c)
		}
	}
	return out
}

// A QuietWindow is what was written between two revisions, sorted by what
// it means (Window).
type QuietWindow struct {
	// Churn are the writes that changed something, and every write that
	// changed nothing after the first such write to the same object.
	Churn []Change
	// Empty are the first write to each object that changed nothing but
	// its resourceVersion (Change.Unchanged): a writer that re-applies what
	// the object already holds and bumps its revision once (core v2.4.2's
	// first status apply after its own status update, for example). A
	// second such write to the same object is churn: that is a loop.
	Empty []Change
	// Late are Events that occurred before since and were written in the
	// window: their source's event queue catching up.
	Late []Change
}

// Window sorts the changes whose revisions are in (from, to].
func Window(changes []Change, from, to int64, since time.Time) QuietWindow {
	var w QuietWindow
	empty := map[string]bool{}
	for _, c := range changes {
		switch {
		case c.Revision <= from || c.Revision > to:
		case !c.Occurred.IsZero() && c.Occurred.Before(since):
			w.Late = append(w.Late, c)
		case c.Unchanged && !empty[c.Name]:
			empty[c.Name] = true
			w.Empty = append(w.Empty, c)
		default:
			w.Churn = append(w.Churn, c)
		}
	}
	return w
}

// Revision writes a marker ConfigMap in ns and returns the revision of that
// write: every write the API server accepts after it has a higher
// resourceVersion. Kubernetes documents resourceVersions as opaque; on the
// local control plane, one etcd, they are etcd's revisions, which is what
// this relies on.
func Revision(ctx context.Context, kube client.Client, ns string) (int64, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "revision-marker-"}}
	if err := kube.Create(ctx, cm); err != nil {
		return 0, errors.Wrap(err, "cannot write a revision marker")
	}
	rev, err := strconv.ParseInt(cm.GetResourceVersion(), 10, 64)
	return rev, errors.Wrapf(err, "resourceVersion %q is not a revision", cm.GetResourceVersion())
}

// eventOccurred is when an Event (core/v1) last occurred: its series' last
// observed time, its lastTimestamp, or its eventTime.
func eventOccurred(u *unstructured.Unstructured) time.Time {
	for _, path := range [][]string{{"series", "lastObservedTime"}, {"lastTimestamp"}, {"eventTime"}} {
		if v, ok, _ := unstructured.NestedString(u.Object, path...); ok && v != "" {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// ChangesSince returns the changes to the objects the watch saw since t.
func (r *ReadyRecorder) ChangesSince(t time.Time) []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Change
	for _, c := range r.changes {
		if !c.At.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

// AllReady reports whether the recorder has seen n objects and every one is
// Ready now.
func (r *ReadyRecorder) AllReady(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ready) < n {
		return false
	}
	for _, ok := range r.ready {
		if !ok {
			return false
		}
	}
	return true
}

// Ready reports whether the named object is Ready now, as far as the
// recorder has seen.
func (r *ReadyRecorder) Ready(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready[name]
}
