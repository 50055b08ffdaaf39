package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// timeline records when each claim first reached each stage.
type timeline struct {
	mu    sync.Mutex
	n     int
	at    map[string]map[string]time.Time
	ready int
	done  chan struct{}
	// A Ready stage that was reached and then lost: the object went back
	// to Ready=False (or, for claims, Synced=False).
	now    map[string]bool           // claim/stage -> reached as of the last version seen
	flaps  map[string]int            // stage -> times lost
	flappy map[string]map[string]int // stage -> claim -> times lost
}

func newTimeline(n int) *timeline {
	return &timeline{
		n: n, at: map[string]map[string]time.Time{}, done: make(chan struct{}),
		now: map[string]bool{}, flaps: map[string]int{}, flappy: map[string]map[string]int{},
	}
}

// set records that a version of the claim's object at stage was seen that
// has (ok) or lacks the stage's condition.
func (tl *timeline) set(claim, stage string, ok bool) {
	if claim == "" {
		return
	}
	if ok {
		tl.mark(claim, stage)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	k := claim + "/" + stage
	if !ok && tl.now[k] {
		tl.flaps[stage]++
		if tl.flappy[stage] == nil {
			tl.flappy[stage] = map[string]int{}
		}
		tl.flappy[stage][claim]++
	}
	tl.now[k] = ok
}

func (tl *timeline) mark(claim, stage string) {
	if claim == "" {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	st := tl.at[claim]
	if st == nil {
		st = map[string]time.Time{}
		tl.at[claim] = st
	}
	if _, ok := st[stage]; ok {
		return
	}
	st[stage] = now
	if stage == stReady {
		tl.ready++
		if tl.ready == tl.n {
			close(tl.done)
		}
	}
}

// progress counts the claims at each stage.
func (tl *timeline) progress() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	parts := make([]string, 0, len(e2eStages))
	for _, s := range e2eStages {
		c := 0
		for _, st := range tl.at {
			if _, ok := st[s]; ok {
				c++
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d", s, c))
	}
	return strings.Join(parts, ", ")
}

// watchStages starts the watches that record in tl when each claim reaches
// each stage: of the claims, their XRs and the Widgets and WidgetKeys
// composed for them. They run until ctx is done; the WaitGroup returned
// ends with them. A watch that had to re-list says so in r.relists.
func (r *e2eRun) watchStages(ctx context.Context, t *testing.T, kube client.WithWatch, tl *timeline) *sync.WaitGroup {
	var wg sync.WaitGroup
	var rmu sync.Mutex
	byClaim := func(stage string, ready bool) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			l := u.GetLabels()
			if l["crossplane.io/claim-namespace"] != e2eNamespace {
				return
			}
			tl.set(l["crossplane.io/claim-name"], stage, !ready || condTrue(u, "Ready"))
		}
	}
	for _, wt := range []struct {
		gvk schema.GroupVersionKind
		ns  string
		see func(u *unstructured.Unstructured)
	}{
		{gvkClaim, e2eNamespace, func(u *unstructured.Unstructured) {
			tl.set(u.GetName(), stReady, claimReady(u))
		}},
		{gvkLegacyXR, "", func(u *unstructured.Unstructured) {
			byClaim(stXR, false)(u)
			byClaim(stXRReady, true)(u)
		}},
		{gvkWidget, "", func(u *unstructured.Unstructured) {
			byClaim(stWidget, false)(u)
			byClaim(stWidgetReady, true)(u)
		}},
		{gvkWidgetKey, "", func(u *unstructured.Unstructured) {
			byClaim(stKey, false)(u)
			byClaim(stKeyReady, true)(u)
		}},
	} {
		wg.Go(func() {
			n, why := watchKind(ctx, t, kube, wt.gvk, wt.ns, wt.see)
			if n > 0 {
				rmu.Lock()
				r.relists = append(r.relists, fmt.Sprintf("%s %d (first: %s)", wt.gvk.Kind, n, why))
				rmu.Unlock()
			}
		})
	}
	return &wg
}

// watchKind lists and watches the objects of a kind (in ns, or all) and
// calls see with every version it sees, until ctx is done.
// It returns how often it had to list again because a watch ended (a
// re-list shows only the current version of each object, not the versions
// in between) and why the first such watch ended.
func watchKind(ctx context.Context, t *testing.T, kube client.WithWatch, gvk schema.GroupVersionKind, ns string, see func(u *unstructured.Unstructured)) (int, string) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	relists, why := -1, ""
	for ctx.Err() == nil {
		relists++
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		if err := kube.List(ctx, l, opts...); err != nil {
			if ctx.Err() == nil {
				t.Logf("cannot list %s: %v", gvk.Kind, err)
				time.Sleep(time.Second)
			}
			continue
		}
		for i := range l.Items {
			see(&l.Items[i])
		}
		wl := &unstructured.UnstructuredList{}
		wl.SetGroupVersionKind(listGVK)
		wi, err := kube.Watch(ctx, wl, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})...)
		if err != nil {
			continue
		}
		ended := "the server closed it"
		for ev := range wi.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				see(u)
			}
			if st, ok := ev.Object.(*metav1.Status); ok && ev.Type == watch.Error {
				ended = st.Message
			}
		}
		wi.Stop()
		if why == "" && ctx.Err() == nil {
			why = ended
		}
	}
	return max(relists, 0), why
}

// collectStages records, per claim Ready by end, the time from its create
// request to each stage and from the stage before it.
func (r *e2eRun) collectStages(sent map[string]time.Time, tl *timeline, end time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	r.flaps, r.flapped = maps.Clone(tl.flaps), map[string]int{}
	for s, cs := range tl.flappy {
		r.flapped[s] = len(cs)
	}
	var slowestAt time.Duration
	for name, at := range sent {
		st := tl.at[name]
		ra, ok := st[stReady]
		if !ok || ra.After(end) {
			continue
		}
		for _, s := range e2eStages {
			ts, ok := st[s]
			if !ok {
				continue
			}
			r.stages[s] = append(r.stages[s], ts.Sub(at))
			prev := at
			if s == stKeyReady {
				prev = st[stKey]
			} else if i := slices.Index(e2ePath, s); i > 0 {
				if p, ok := st[e2ePath[i-1]]; ok {
					prev = p
				}
			}
			r.gaps[s] = append(r.gaps[s], ts.Sub(prev))
		}
		if xr, ok := st[stXRReady]; ok && xr.After(ra) {
			r.inverted++
		}
		if d := ra.Sub(at); d > slowestAt {
			slowestAt = d
			parts := make([]string, 0, len(e2eStages))
			for _, s := range e2eStages {
				if ts, ok := st[s]; ok {
					parts = append(parts, fmt.Sprintf("%s %s", s, secs(ts.Sub(at))))
				}
			}
			r.slowest = name + ": " + strings.Join(parts, ", ")
		}
	}
}

// xrWatchLag returns, for each XR that became Ready once and stayed so, how
// long after its Ready condition's lastTransitionTime (a second's
// resolution) the benchmark's watch first saw it Ready.
func (e *e2eEnv) xrWatchLag(ctx context.Context, t *testing.T, tl *timeline) []time.Duration {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvkLegacyXR.GroupVersion().WithKind(gvkLegacyXR.Kind + "List"))
	if err := e.kube.List(ctx, l); err != nil {
		t.Logf("cannot list XRs: %v", err)
		return nil
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []time.Duration
	for i := range l.Items {
		x := &l.Items[i]
		c := x.GetLabels()["crossplane.io/claim-name"]
		seen, ok := tl.at[c][stXRReady]
		if x.GetLabels()["crossplane.io/claim-namespace"] != e2eNamespace || !ok || tl.flappy[stXRReady][c] > 0 {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(x.Object, "status", "conditions")
		for _, ci := range cs {
			m, _ := ci.(map[string]any)
			if m["type"] != "Ready" || m["status"] != "True" {
				continue
			}
			s, _ := m["lastTransitionTime"].(string)
			if ltt, err := time.Parse(time.RFC3339, s); err == nil {
				out = append(out, max(seen.Sub(ltt)-time.Second, 0))
			}
		}
	}
	return out
}
