//go:build linux

package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// timeline records when each object that the run creates (its owner: a
// claim or a namespaced XWidget) first reached each stage, and the Ready
// stages it lost again.
type timeline struct {
	mu    sync.Mutex
	n     int
	kinds []*e2eKind
	at    map[string]map[string]time.Time // owner -> stage -> first reached
	ready int
	done  chan struct{}
	// The owner's objects that have reached a stage, and those at it as of
	// the last version seen: owner/stage -> object.
	seen map[string]map[string]bool
	now  map[string]map[string]bool
	lost []readyLoss
}

// A readyLoss is a Ready stage that an owner's object reached and then
// lost: a later version went back to Ready=False (or, for claims and
// XWidgets, Synced=False).
type readyLoss struct {
	owner, stage string
	at           time.Time
}

func newTimeline(n int, kinds []*e2eKind) *timeline {
	return &timeline{
		n: n, kinds: kinds, at: map[string]map[string]time.Time{}, done: make(chan struct{}),
		seen: map[string]map[string]bool{}, now: map[string]map[string]bool{},
	}
}

// set records that a version of obj, one of owner's objects at stage, was
// seen that has (ok) or lacks the stage's condition. The owner reaches the
// stage when all its objects of the stage have.
func (tl *timeline) set(owner, obj, stage string, ok bool) {
	if owner == "" {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	k := owner + "/" + stage
	if tl.now[k] == nil {
		tl.now[k], tl.seen[k] = map[string]bool{}, map[string]bool{}
	}
	if !ok && tl.now[k][obj] {
		tl.lost = append(tl.lost, readyLoss{owner: owner, stage: stage, at: now})
	}
	tl.now[k][obj] = ok
	if !ok {
		return
	}
	tl.seen[k][obj] = true
	if len(tl.seen[k]) < tl.objects(owner, stage) {
		return
	}
	st := tl.at[owner]
	if st == nil {
		st = map[string]time.Time{}
		tl.at[owner] = st
	}
	if _, ok := st[stage]; ok {
		return
	}
	st[stage] = now
	if kd := kindOf(tl.kinds, owner); kd != nil && stage == kd.final {
		tl.ready++
		if tl.ready == tl.n {
			close(tl.done)
		}
	}
}

// objects is how many objects of stage an owner has: its WidgetKeys for a
// WidgetKey stage, else one.
func (tl *timeline) objects(owner, stage string) int {
	if kd := kindOf(tl.kinds, owner); kd != nil && (stage == stKey || stage == stKeyReady) {
		return max(kd.keys, 1)
	}
	return 1
}

// lostStage reports whether owner lost stage once it had reached it.
func (tl *timeline) lostStage(owner, stage string) bool {
	for _, l := range tl.lost {
		if l.owner == owner && l.stage == stage {
			return true
		}
	}
	return false
}

// progress counts the objects at each stage.
func (tl *timeline) progress() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var stages []string
	for _, k := range tl.kinds {
		for _, s := range k.stages {
			if !slices.Contains(stages, s) {
				stages = append(stages, s)
			}
		}
	}
	parts := make([]string, 0, len(stages))
	for _, s := range stages {
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

// watchStages starts the watches that record in tl when each object of the
// run's kinds reaches each stage (see e2eKind.watches). They run until ctx
// is done; the WaitGroup returned ends with them. A watch that had to
// re-list says so in r.relists.
func (r *e2eRun) watchStages(ctx context.Context, t *testing.T, kube client.WithWatch, tl *timeline) *sync.WaitGroup {
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for _, k := range r.kinds {
		for _, wt := range k.kind.watches(tl) {
			wg.Go(func() {
				n, why := watchKind(ctx, t, kube, wt.gvk, wt.ns, wt.see)
				if n > 0 {
					what := wt.gvk.Kind
					if len(r.kinds) > 1 {
						what = wt.gvk.GroupKind().String()
					}
					rmu.Lock()
					r.relists = append(r.relists, fmt.Sprintf("%s %d (first: %s)", what, n, why))
					rmu.Unlock()
				}
			})
		}
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

// collectStages records, per object Ready by end, the time from its create
// request to each stage and from the stage before it, and the Ready stages
// lost, by kind.
func (r *e2eRun) collectStages(sent map[string]time.Time, tl *timeline, end time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	lost := map[string]map[string]bool{} // stage -> owners that lost it
	for _, l := range tl.lost {
		k := r.kindOf(l.owner)
		if k == nil {
			continue
		}
		k.flaps[l.stage]++
		if lost[l.stage] == nil {
			lost[l.stage] = map[string]bool{}
		}
		if !lost[l.stage][l.owner] {
			lost[l.stage][l.owner] = true
			k.flapped[l.stage]++
		}
		if l.stage == k.kind.final || l.stage == stXRReady {
			k.losses = append(k.losses, l.at)
		}
		if l.at.After(end) && (l.stage == k.kind.final || l.stage == stXRReady) {
			k.lostAfter++
		}
	}
	for name, at := range sent {
		if k := r.kindOf(name); k != nil {
			k.collect(name, at, tl.at[name], end)
		}
	}
}

// collect records the stages st of the object name, sent at at, if it was
// Ready by end.
func (k *kindRun) collect(name string, at time.Time, st map[string]time.Time, end time.Time) {
	ra, ok := st[k.kind.final]
	if !ok || ra.After(end) {
		return
	}
	for _, s := range k.kind.stages {
		ts, ok := st[s]
		if !ok {
			continue
		}
		k.stages[s] = append(k.stages[s], ts.Sub(at))
		prev := at
		if s == stKeyReady {
			prev = st[stKey]
		} else if i := slices.Index(k.kind.path, s); i > 0 {
			if p, ok := st[k.kind.path[i-1]]; ok {
				prev = p
			}
		}
		k.gaps[s] = append(k.gaps[s], ts.Sub(prev))
	}
	if xr, ok := st[stXRReady]; ok && xr.After(ra) {
		k.inverted++
	}
	if d := ra.Sub(at); d > k.slowestAt {
		k.slowestAt = d
		parts := make([]string, 0, len(k.kind.stages))
		for _, s := range k.kind.stages {
			if ts, ok := st[s]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", s, secs(ts.Sub(at))))
			}
		}
		k.slowest = name + ": " + strings.Join(parts, ", ")
	}
}

// xrWatchLag returns, for each legacy XR that became Ready once and stayed
// so, how long after its Ready condition's lastTransitionTime (a second's
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
		if x.GetLabels()["crossplane.io/claim-namespace"] != e2eNamespace || !ok || tl.lostStage(c, stXRReady) {
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

// TestTimeline checks how the timeline follows objects to their stages
// (it runs without WIDGET_BENCH).
func TestTimeline(t *testing.T) {
	claims, xwidgets := *kindClaim, *kindXWidget
	claims.keys, xwidgets.keys = 1, 2
	kinds := []*e2eKind{&claims, &xwidgets}
	type seen struct {
		owner, obj, stage string
		ok                bool
	}
	type result struct {
		Reached map[string][]string // owner -> stages reached
		Lost    []string            // owner: stage
		Done    bool
	}
	cases := map[string]struct {
		reason string
		n      int
		seen   []seen
		want   result
	}{
		"OneKey": {
			reason: "a claim with one WidgetKey reaches the WidgetKey stages with it",
			n:      1,
			seen:   []seen{{"c-0000", "k1", stKey, true}, {"c-0000", "k1", stKeyReady, true}},
			want:   result{Reached: map[string][]string{"c-0000": {stKey, stKeyReady}}},
		},
		"TwoKeys": {
			reason: "an XWidget with two WidgetKeys reaches a WidgetKey stage when both have",
			n:      1,
			seen: []seen{
				{"x-0000", "k1", stKey, true}, {"x-0000", "k1", stKeyReady, true},
				{"x-0000", "k2", stKey, true}, {"x-0000", "k2", stKeyReady, false},
			},
			want: result{Reached: map[string][]string{"x-0000": {stKey}}},
		},
		"LostReady": {
			reason: "Ready is lost when the object that had it goes back, not when another of the owner's objects lacks it",
			n:      1,
			seen: []seen{
				{"x-0000", "k1", stKeyReady, true}, {"x-0000", "k2", stKeyReady, false},
				{"x-0000", "k1", stKeyReady, false}, {"x-0000", "x-0000", stXWidgetReady, false},
			},
			want: result{Reached: map[string][]string{}, Lost: []string{"x-0000: " + stKeyReady}},
		},
		"AllReady": {
			reason: "the run is done when every object has reached its kind's Ready stage",
			n:      2,
			seen: []seen{
				{"c-0000", "c-0000", stReady, true}, {"x-0000", "x-0000", stXWidgetReady, true},
				{"c-0000", "c-0000", stReady, false},
			},
			want: result{
				Reached: map[string][]string{"c-0000": {stReady}, "x-0000": {stXWidgetReady}},
				Lost:    []string{"c-0000: " + stReady},
				Done:    true,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tl := newTimeline(tc.n, kinds)
			for _, s := range tc.seen {
				tl.set(s.owner, s.obj, s.stage, s.ok)
			}
			got := result{Reached: map[string][]string{}}
			for owner, st := range tl.at {
				for _, s := range e2eStages {
					if _, ok := st[s]; ok {
						got.Reached[owner] = append(got.Reached[owner], s)
					}
				}
				if _, ok := st[stXWidgetReady]; ok {
					got.Reached[owner] = append(got.Reached[owner], stXWidgetReady)
				}
			}
			for _, l := range tl.lost {
				got.Lost = append(got.Lost, l.owner+": "+l.stage)
			}
			select {
			case <-tl.done:
				got.Done = true
			default:
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
