//go:build linux

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func init() { register(30, "drift", driftSection) }

const (
	driftToken    = "bench-token" // of project "bench"
	driftWorkers  = 8             // concurrent clients creating Widgets and sending a burst
	driftSettle   = 2 * time.Second
	driftDesired  = widgetapi.SizeMedium
	driftOutOfBnd = widgetapi.SizeLarge
)

// driftSection: N out-of-band changes to Widgets' widgets, and how long the
// provider takes to undo them, with the change feed and with polling only.
func driftSection(t *testing.T, b *bench) string {
	n := envInt("WIDGET_BENCH_DRIFT_N", 100)
	poll := time.Duration(envInt("WIDGET_BENCH_DRIFT_POLL_SECONDS", 30)) * time.Second
	runs := envInt("WIDGET_BENCH_RUNS", 1)
	k := b.kube(t)
	// WIDGET_BENCH_DRIFT_BIN runs another provider binary (a baseline
	// build) instead of the working tree's.
	bin := os.Getenv("WIDGET_BENCH_DRIFT_BIN")
	if bin == "" {
		bin = b.build(t, "provider-widget", "./provider")
	}
	modes := []bool{true, false}
	if os.Getenv("WIDGET_BENCH_DRIFT_POLLING") == "0" {
		modes = []bool{true} // the change feed only
	}
	left := removeLeftoverWidgets(t, k)
	load0 := loadAvg()

	var rs []driftRun
	for run := range runs {
		for _, feed := range modes {
			r := runDrift(t, k, bin, run, n, feed, poll)
			for _, p := range r.phases {
				t.Logf("drift run %d, %s, %s: p50 %s, p99 %s, max %s, %d not repaired", run, r.mode(), p.pattern, quantile(p.latency, .5), quantile(p.latency, .99), quantile(p.latency, 1), p.missing)
			}
			rs = append(rs, r)
		}
	}
	return driftDoc(t, rs, n, poll, runs, left, load0)
}

// driftRun is one provider process (one mode) and its phases.
type driftRun struct {
	run    int
	feed   bool
	args   []string // provider flags after --kubeconfig
	ready  time.Duration
	phases []driftPhase
	// floor is the burst repaired without the provider (floorBurst);
	// change feed runs only.
	floor *driftPhase
	wrong int    // widgets not back to the desired state at the end
	poll  string // the poll interval the provider logged at start-up
}

func (r driftRun) mode() string {
	if r.feed {
		return "change feed"
	}
	return "polling only"
}

// driftPhase is one batch of N out-of-band changes and their repair.
type driftPhase struct {
	pattern string
	burst   bool
	latency []time.Duration // change committed to repair committed, per widget
	missing int             // changes not repaired before the timeout
	sendFor time.Duration   // sending all changes
	window  time.Duration   // first change to last repair
	delta   provSnap        // provider metrics over the window (+ settle)
	unready int             // Widgets not Ready=True after the settle
	readyIn time.Duration   // last repair to all Widgets Ready=True again; -1: not within the timeout
}

// runDrift starts a Widget API server and a provider (feed on or polling
// only), creates n Widgets, waits until all are Ready, and then makes n
// out-of-band changes per phase and waits for their repair.
func runDrift(t *testing.T, k *kubeEnv, bin string, run, n int, feed bool, poll time.Duration) driftRun {
	t.Helper()
	ctx := context.Background()
	r := driftRun{run: run, feed: feed}
	s, err := server.New(server.Options{DataDir: t.TempDir(), Tokens: map[string]string{driftToken: "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer func() { s.Shutdown(); hs.Close(); _ = s.Close() }()

	mode := "poll"
	var extra []string
	if feed {
		mode = "feed"
	} else {
		extra = []string{"--no-change-feed", "--poll-interval=" + poll.String()}
	}
	ns := fmt.Sprintf("drift-%s-%d", mode, run)
	setupWidgetProject(t, k, ns, hs.URL, driftToken)
	p := startProviderProcess(t, k, bin, ns, extra)
	defer p.stop()
	r.args, r.poll = p.args, loggedPollInterval(p.log)

	// N Widgets to Ready.
	readyAt := make(map[string]time.Time, n)
	var mu sync.Mutex
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	allReady := make(chan struct{})
	go watchReady(watchCtx, t, k.kube, ns, n, readyAt, &mu, allReady)
	t0 := time.Now()
	createAll(t, k.kube, n, driftWorkers, func(i int) client.Object {
		w := &nsv1beta1.Widget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%05d", i)},
			Spec: nsv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{
				Size: ptr.To(driftDesired), Labels: map[string]string{"team": "a"},
			}},
		}
		w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
		return w
	})
	select {
	case <-allReady:
	case <-time.After(time.Duration(n)*200*time.Millisecond + 2*time.Minute + 2*poll):
		mu.Lock()
		got := len(readyAt)
		mu.Unlock()
		t.Fatalf("only %d of %d Widgets Ready; provider log in %s", got, n, p.log)
	}
	r.ready = time.Since(t0)
	cancelWatch()

	// Which widget each Widget manages.
	l, widgets := managedWidgets(t, k, ns)
	if len(widgets) != n {
		t.Fatalf("%d of %d Widgets have an external name", len(widgets), n)
	}
	time.Sleep(driftSettle) // let the reconciles that follow creation finish

	api, err := widgetapi.New(hs.URL, widgetapi.WithToken(driftToken))
	if err != nil {
		t.Fatal(err)
	}
	fl := followUpdates(ctx, t, api)
	defer fl.stop()

	phases := []driftPhase{{pattern: fmt.Sprintf("spread over %s", poll)}}
	if feed {
		phases = append(phases, driftPhase{pattern: fmt.Sprintf("burst (%d clients)", driftWorkers), burst: true})
	}
	timeout := time.Minute
	if !feed {
		timeout += poll + poll/10
	}
	rng := rand.New(rand.NewPCG(uint64(run), 7))
	for i := range phases {
		ph := &phases[i]
		before := snapProvider(p.metrics)
		sent, sendFor := sendChanges(t, api, rng.Perm(n), widgets, ph.burst, poll, nil)
		ph.sendFor = sendFor
		last := ph.awaitRepairs(fl, sent, timeout)
		time.Sleep(driftSettle)
		ph.delta = snapProvider(p.metrics).minus(before)
		ph.unready = notReady(t, k, ns)
		ph.readyIn = -1
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if notReady(t, k, ns) == 0 {
				ph.readyIn = time.Since(last)
				break
			}
		}
		if ph.missing > 0 {
			t.Logf("drift %s %s: %d of %d changes not repaired within %s after the last one; provider log in %s", ns, ph.pattern, ph.missing, len(sent), timeout, p.log)
		}
	}
	r.phases = phases

	// The machine's floor for the burst: the provider stopped, the same
	// burst repaired by the least a repairer must do.
	if feed && os.Getenv("WIDGET_BENCH_DRIFT_FLOOR") != "0" {
		p.stop()
		r.floor = floorBurst(t, k, api, fl, l.Items, rng.Perm(n), timeout)
		t.Logf("drift run %d, floor: p50 %s, p99 %s, max %s, %d not repaired", run, quantile(r.floor.latency, .5), quantile(r.floor.latency, .99), quantile(r.floor.latency, 1), r.floor.missing)
	}

	// Every widget back to what its Widget says? A repair's resize
	// finishes asynchronously, so the widgets get a few seconds to be
	// Ready again; the size and labels are right from the repair on.
	var wrong []widgetapi.Widget
	for deadline := time.Now().Add(driftSettle * 5); ; time.Sleep(200 * time.Millisecond) {
		wrong = notBack(t, api, widgets)
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	r.wrong = len(wrong)
	for _, w := range wrong {
		t.Logf("drift %s: widget %s is size %q, team %q, state %s at the end", ns, w.Name, w.Size, w.Labels["team"], w.State)
	}

	fl.stop()
	p.stop()
	cleanup(t, k, ns, driftWorkers)
	return r
}

// notBack returns the widgets (by name) that are not of the desired size,
// label team=a and Ready.
func notBack(t *testing.T, api *widgetapi.Client, widgets []string) []widgetapi.Widget {
	t.Helper()
	got := map[string]widgetapi.Widget{}
	for tok := ""; ; {
		wl, err := api.ListWidgets(context.Background(), widgetapi.ListWidgetsOptions{Limit: 500, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wl.Items {
			got[w.Name] = w
		}
		if tok = wl.NextPageToken; tok == "" {
			break
		}
	}
	var wrong []widgetapi.Widget
	for _, name := range widgets {
		w := got[name]
		if w.Size != driftDesired || w.Labels["team"] != "a" || w.State != widgetapi.StateReady {
			w.Name = name
			wrong = append(wrong, w)
		}
	}
	return wrong
}

// notReady counts the Widgets in ns that are not Ready=True.
func notReady(t *testing.T, k *kubeEnv, ns string) int {
	t.Helper()
	l := &nsv1beta1.WidgetList{}
	if err := k.kube.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	c := 0
	for i := range l.Items {
		if l.Items[i].GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
			c++
		}
	}
	return c
}

// loggedPollInterval returns the poll interval a provider logged at
// start-up, or "unknown".
func loggedPollInterval(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg  string `json:"msg"`
			Poll string `json:"poll-interval"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "Starting provider-widget" && l.Poll != "" {
			return l.Poll
		}
	}
	return "unknown"
}

// sendChanges resizes each widget (in order) from the desired size to
// another one with the project's token, as someone changing it by hand
// would: spread evenly over `over`, or all at once from driftWorkers
// clients, calling sentHook (when set) with each widget changed. It
// returns each change's generation and commit time.
func sendChanges(t *testing.T, api *widgetapi.Client, order []int, widgets []string, burst bool, over time.Duration, sentHook func(string)) (map[string]widgetapi.Widget, time.Duration) {
	t.Helper()
	ctx := context.Background()
	sent := make(map[string]widgetapi.Widget, len(order))
	var mu sync.Mutex
	change := func(name string) {
		w, err := api.PatchWidget(ctx, name, widgetapi.PatchWidgetRequest{Size: ptr.To(driftOutOfBnd)})
		if err != nil {
			t.Errorf("cannot change widget %s: %v", name, err)
			return
		}
		mu.Lock()
		sent[name] = *w
		mu.Unlock()
		if sentHook != nil {
			sentHook(name)
		}
	}
	start := time.Now()
	if !burst {
		for i, j := range order {
			time.Sleep(time.Until(start.Add(time.Duration(i) * over / time.Duration(len(order)))))
			change(widgets[j])
		}
		return sent, time.Since(start)
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range driftWorkers {
		wg.Go(func() {
			for name := range work {
				change(name)
			}
		})
	}
	for _, j := range order {
		work <- widgets[j]
	}
	close(work)
	wg.Wait()
	return sent, time.Since(start)
}

// updateLog follows the project's change feed and keeps every
// widget.updated entry, by widget.
type updateLog struct {
	mu      sync.Mutex
	updates map[string][]widgetapi.Change
	stop    func()
}

func followUpdates(ctx context.Context, t *testing.T, api *widgetapi.Client) *updateLog {
	t.Helper()
	latest, err := api.Changes(ctx, widgetapi.ChangesOptions{After: widgetapi.FromLatest})
	if err != nil {
		t.Fatal(err)
	}
	u := &updateLog{updates: map[string][]widgetapi.Change{}}
	f := api.NewFollower(func(_ context.Context, c widgetapi.Change) {
		if c.Type != widgetapi.ChangeWidgetUpdated {
			return
		}
		u.mu.Lock()
		u.updates[c.Widget] = append(u.updates[c.Widget], c)
		u.mu.Unlock()
	})
	f.Wait = 10 * time.Second
	f.OnResync = func(context.Context) { t.Errorf("the bench's change feed follower lost its position") }
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.Run(fctx, latest.LatestSeq) }()
	var once sync.Once
	u.stop = func() { once.Do(func() { cancel(); <-done }) }
	return u
}

// repairs returns, for the changes sent, the latency from each change's
// commit to its repair's commit (the first later widget.updated entry: only
// the provider writes besides us), how many are not repaired yet, and the
// first change and the last repair.
func (u *updateLog) repairs(sent map[string]widgetapi.Widget) ([]time.Duration, int, time.Time, time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	lat := make([]time.Duration, 0, len(sent))
	missing := 0
	first, last := time.Time{}, time.Time{}
	for name, w := range sent {
		if first.IsZero() || w.UpdatedAt.Before(first) {
			first = w.UpdatedAt
		}
		i := slices.IndexFunc(u.updates[name], func(c widgetapi.Change) bool { return c.Generation > w.Generation })
		if i < 0 {
			missing++
			continue
		}
		at := u.updates[name][i].Time
		lat = append(lat, at.Sub(w.UpdatedAt))
		if at.After(last) {
			last = at
		}
	}
	return lat, missing, first, last
}

// provSnap is a reading of the provider's counters.
type provSnap struct {
	reconciles, errors, kube, api, drift, enqueues, skips float64
	// deferred: reconciles put off for a cache behind the provider's own
	// write (widget_stale_cache_waits_total{outcome="deferred"}).
	deferred float64
	ops      map[string]float64 // Widget API requests by operation
}

func snapProvider(addr string) provSnap {
	s := provSnap{ops: map[string]float64{}}
	for _, x := range promSamples(addr, "controller_runtime_reconcile_total") {
		s.reconciles += x.Value
		if x.Labels["result"] == "error" {
			s.errors += x.Value
		}
	}
	for _, x := range promSamples(addr, "widget_api_requests_total") {
		s.api += x.Value
		s.ops[x.Labels["operation"]] += x.Value
	}
	for _, x := range promSamples(addr, "widget_updates_total") {
		if x.Labels["cause"] == "drift" {
			s.drift += x.Value
		}
	}
	s.kube = max(promSum(addr, "rest_client_requests_total"), 0)
	s.enqueues = max(promSum(addr, "widget_feed_enqueues_total"), 0)
	s.skips = max(promSum(addr, "widget_feed_skips_total"), 0)
	s.deferred = promSamples(addr, "widget_stale_cache_waits_total").By("outcome")["deferred"]
	return s
}

func (s provSnap) minus(o provSnap) provSnap {
	d := provSnap{
		reconciles: s.reconciles - o.reconciles, errors: s.errors - o.errors, kube: s.kube - o.kube,
		api: s.api - o.api, drift: s.drift - o.drift, enqueues: s.enqueues - o.enqueues, skips: s.skips - o.skips,
		deferred: s.deferred - o.deferred,
		ops:      map[string]float64{},
	}
	for op, v := range s.ops {
		if v -= o.ops[op]; v != 0 {
			d.ops[op] = v
		}
	}
	return d
}

// removeLeftoverWidgets removes the Widgets earlier sections left behind:
// their Widget API servers are gone, so a new provider would spend its
// workers and its rate limit retrying them. It returns how many there were.
func removeLeftoverWidgets(t *testing.T, k *kubeEnv) int {
	t.Helper()
	l := &nsv1beta1.WidgetList{}
	if err := k.kube.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, w := range l.Items {
		by[w.Namespace]++
	}
	for _, ns := range slices.Sorted(maps.Keys(by)) {
		t.Logf("removing %d Widgets left in namespace %s", by[ns], ns)
		cleanup(t, k, ns, driftWorkers)
	}
	return len(l.Items)
}

// floorWorkers is how many repairs floorBurst runs at once: the provider's
// concurrent reconciles at its default --max-reconcile-rate.
const floorWorkers = 50

// floorBurst sends a burst of out-of-band changes (one per Widget, in
// order) while the provider is stopped, and repairs them with the least a
// repairer must do, in the bench process: it learns of each change when
// its PATCH returns (no change feed, cache, queue or rate limit) and then
// reads the widget (GET), puts it back with a conditional PUT, and writes
// the Widget's status once (the new generation), from floorWorkers
// goroutines. What the provider's repairs of the same burst take beyond
// this is its own overhead; this much is the machine's.
func floorBurst(t *testing.T, k *kubeEnv, api *widgetapi.Client, fl *updateLog, items []nsv1beta1.Widget, order []int, timeout time.Duration) *driftPhase {
	t.Helper()
	ctx := context.Background()
	byWidget := make(map[string]*nsv1beta1.Widget, len(items))
	widgets := make([]string, 0, len(items))
	for i := range items {
		en := meta.GetExternalName(&items[i])
		byWidget[en] = &items[i]
		widgets = append(widgets, en)
	}
	slices.Sort(widgets)
	repair := func(name string) {
		w, err := api.GetWidget(ctx, name)
		if err != nil {
			t.Errorf("floor: cannot get widget %s: %v", name, err)
			return
		}
		put, err := api.ReplaceWidget(ctx, name, widgetapi.ReplaceWidgetRequest{Size: driftDesired, Labels: w.Labels, Description: w.Description},
			widgetapi.IfGeneration(w.Generation))
		if err != nil {
			t.Errorf("floor: cannot put widget %s back: %v", name, err)
			return
		}
		mg := byWidget[name].DeepCopy()
		orig := mg.DeepCopy()
		mg.Status.AtProvider.Generation = put.Generation
		if err := k.kube.Status().Patch(ctx, mg, client.MergeFrom(orig)); err != nil {
			t.Errorf("floor: cannot write the status of Widget %s: %v", mg.Name, err)
		}
	}
	work := make(chan string, len(widgets))
	var wg sync.WaitGroup
	for range floorWorkers {
		wg.Go(func() {
			for name := range work {
				repair(name)
			}
		})
	}
	ph := &driftPhase{pattern: fmt.Sprintf("burst (%d clients), minimal repairer, provider stopped", driftWorkers), burst: true, readyIn: -1}
	sent, sendFor := sendChanges(t, api, order, widgets, true, 0, func(name string) { work <- name })
	close(work)
	wg.Wait()
	ph.sendFor = sendFor
	ph.awaitRepairs(fl, sent, timeout)
	return ph
}

// awaitRepairs waits until every change sent is repaired or timeout has
// passed, records the repairs' latencies, the changes not repaired and the
// window from the first change to the last repair, and returns the last
// repair's time.
func (ph *driftPhase) awaitRepairs(fl *updateLog, sent map[string]widgetapi.Widget, timeout time.Duration) time.Time {
	var first, last time.Time
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		ph.latency, ph.missing, first, last = fl.repairs(sent)
		if ph.missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	ph.window = last.Sub(first)
	return last
}

// managedWidgets lists the Widgets in ns and the widgets they manage (their
// external names, sorted); Widgets without one are left out of the names.
func managedWidgets(t *testing.T, k *kubeEnv, ns string) (*nsv1beta1.WidgetList, []string) {
	t.Helper()
	l := &nsv1beta1.WidgetList{}
	if err := k.kube.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	widgets := make([]string, 0, len(l.Items))
	for i := range l.Items {
		if en := meta.GetExternalName(&l.Items[i]); en != "" {
			widgets = append(widgets, en)
		}
	}
	slices.Sort(widgets)
	return l, widgets
}
