// Package staleconditions reproduces Crossplane core v2.4.2's stale XR
// conditions (crossplane/crossplane#7062) with nothing but Crossplane and
// function-patch-and-transform: many XRs that each compose one ConfigMap are
// created at once, and every change of their Ready condition is watched.
// An XR that loses Ready after its first Ready, though its ConfigMap never
// changed, is the bug. cmd/repro runs it against any cluster (kind, for
// upstream); TestUpstreamStaleConditions runs it on this repository's local
// control plane. README.md says how, with the numbers measured here.
package staleconditions

import (
	"context"
	"embed"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// GVR is the reproduction's composite resource, XRepro.
var GVR = schema.GroupVersionResource{Group: "repro.example.org", Version: "v1alpha1", Resource: "xrepros"}

// Manifests are the XRD, the Composition and the ClusterRole that lets core
// compose ConfigMaps, in the order to apply them. The Function
// (function.yaml) is not among them: on kind it comes from the upstream
// registry, here from a loopback one.
func Manifests() ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, 3)
	for _, f := range []string{"manifests/rbac.yaml", "manifests/xrd.yaml", "manifests/composition.yaml"} {
		b, err := manifests.ReadFile(f)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read embedded %s", f)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, errors.Wrapf(err, "cannot parse embedded %s", f)
		}
		out = append(out, u)
	}
	return out, nil
}

// Apply creates the manifests (those that exist are left as they are), then
// waits until the XRepro API is served.
func Apply(ctx context.Context, kube client.Client) error {
	objs, err := Manifests()
	if err != nil {
		return err
	}
	if err := platform.Create(ctx, kube, objs...); err != nil {
		return err
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(GVR.GroupVersion().String())
	l.SetKind("XReproList")
	var last error
	for {
		if last = kube.List(ctx, l); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrap(last, "the XRepro API is not served: is Crossplane running, and is the XRD established (kubectl get xrd xrepros.repro.example.org)?")
		case <-time.After(time.Second):
		}
	}
}

// Options of a run.
type Options struct {
	// Namespace the XRs are created in. Created if it does not exist; it
	// must hold no XRepro yet.
	Namespace string
	// N is how many XRs are created, by Clients clients at once.
	N, Clients int
	// Quiet is how long Ready is watched after all XRs are Ready.
	Quiet time.Duration
	// Timeout bounds the wait for all XRs to be Ready.
	Timeout time.Duration
	// Progress, if set, is called every few seconds while XRs converge.
	Progress func(ready, n int, elapsed time.Duration)
}

// A Result is what a run saw.
type Result struct {
	N int
	// ReadyAfter is how long after the first create all XRs were Ready,
	// at AllReadyAt.
	ReadyAfter time.Duration
	AllReadyAt time.Time
	// Losses are the changes of an XR's Ready condition from True to
	// anything else, until Quiet after all were Ready.
	Losses []platform.ReadyLoss
}

// LostXRs is how many XRs lost Ready at least once.
func (r Result) LostXRs() int {
	seen := map[string]bool{}
	for _, l := range r.Losses {
		seen[l.Name] = true
	}
	return len(seen)
}

// LostAfterAllReady is how many of the losses came after all XRs were
// Ready: core's loop going on with nothing left to converge.
func (r Result) LostAfterAllReady() int {
	n := 0
	for _, l := range r.Losses {
		if l.At.After(r.AllReadyAt) {
			n++
		}
	}
	return n
}

// Reasons counts the losses by the Ready condition's reason and message.
func (r Result) Reasons() []string {
	n := map[string]int{}
	for _, l := range r.Losses {
		n[l.Status+" "+l.Reason+": "+l.Message]++
	}
	out := make([]string, 0, len(n))
	for k, c := range n {
		out = append(out, fmt.Sprintf("%dx Ready=%s", c, k))
	}
	sort.Strings(out)
	return out
}

// Run creates o.N XRepros in o.Namespace and records every loss of Ready
// until o.Quiet after all are Ready.
func Run(ctx context.Context, cfg *rest.Config, kube client.Client, o Options) (Result, error) {
	res := Result{N: o.N}
	if o.N < 1 || o.Clients < 1 {
		return res, errors.Errorf("need at least one XR and one client, got %d and %d", o.N, o.Clients)
	}
	if err := platform.EnsureNamespace(ctx, kube, o.Namespace); err != nil {
		return res, err
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(GVR.GroupVersion().String())
	l.SetKind("XReproList")
	if err := kube.List(ctx, l, client.InNamespace(o.Namespace), client.Limit(1)); err != nil {
		return res, errors.Wrapf(err, "cannot list XRepros in %s", o.Namespace)
	}
	if len(l.Items) > 0 {
		return res, errors.Errorf("namespace %s already has XRepros, so their Ready history is not this run's: delete it (kubectl delete namespace %s) or pass another namespace", o.Namespace, o.Namespace)
	}
	rec, err := platform.RecordReady(ctx, cfg, GVR, o.Namespace, "")
	if err != nil {
		return res, err
	}
	defer func() { _, _ = rec.Stop() }()

	begin := time.Now()
	if err := createAll(ctx, kube, o); err != nil {
		return res, err
	}
	deadline := time.Now().Add(o.Timeout)
	lastProgress := time.Now()
	for !rec.AllReady(o.N) {
		if time.Now().After(deadline) {
			return res, errors.Errorf("only %d of %d XRepros were Ready %s after the first create: is function-patch-and-transform installed and healthy (kubectl get functions), and may core compose ConfigMaps (manifests/rbac.yaml)?", readyCount(rec, o), o.N, o.Timeout)
		}
		if o.Progress != nil && time.Since(lastProgress) >= 5*time.Second {
			o.Progress(readyCount(rec, o), o.N, time.Since(begin))
			lastProgress = time.Now()
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.AllReadyAt = time.Now()
	res.ReadyAfter = res.AllReadyAt.Sub(begin)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(o.Quiet):
	}
	res.Losses = rec.Lost()
	return res, nil
}

// Name is the name of XR i.
func Name(i int) string { return fmt.Sprintf("r%03d", i) }

func readyCount(rec *platform.ReadyRecorder, o Options) int {
	n := 0
	for i := range o.N {
		if rec.Ready(Name(i)) {
			n++
		}
	}
	return n
}

// createAll creates the XRs, o.Clients at a time.
func createAll(ctx context.Context, kube client.Client, o Options) error {
	work := make(chan int)
	errs := make(chan error, o.Clients)
	var wg sync.WaitGroup
	for range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "small"}}}
				xr.SetAPIVersion(GVR.GroupVersion().String())
				xr.SetKind("XRepro")
				xr.SetNamespace(o.Namespace)
				xr.SetName(Name(i))
				if err := kube.Create(ctx, xr); err != nil {
					errs <- errors.Wrapf(err, "cannot create XRepro %s/%s", o.Namespace, xr.GetName())
					return
				}
			}
		}()
	}
	var failed error
feed:
	for i := range o.N {
		select {
		case work <- i:
		case failed = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if failed != nil {
		return failed
	}
	msgs := make([]string, 0, len(errs))
	for err := range errs {
		msgs = append(msgs, err.Error())
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}
