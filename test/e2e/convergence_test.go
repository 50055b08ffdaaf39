//go:build linux

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
)

// convergenceQuiet is how long TestConvergence watches a settled control
// plane for writes nothing asked for.
const convergenceQuiet = 30 * time.Second

// TestConvergence is the guard against churn: 30 WidgetClaims and 30
// XWidgets created at once by concurrent clients go Ready, and then the
// control plane goes quiet. It fails, by counts and never by timings, when
// any claim or XR that was Ready loses Ready, when Crossplane's per-XR
// circuit breaker opens (too many watch events for one XR), or when anything
// of the scenario - claims, XRs, managed resources, connection Secrets,
// events - is written in the 30 s after everything is Ready, when nothing
// asked for a change.
//
// The window is delimited by etcd revisions, not by when the watches deliver
// (seconds late under this load), and an Event that occurred before the
// window but that its source's queue wrote only in it is logged, not
// counted: that is a backlog draining, not churn. So is one write per
// object that changes nothing but its resourceVersion (platform.Window);
// a second one to the same object is counted. No other scenario changes a
// namespace policy meanwhile: that has core reconcile every XR of the
// cluster, which is a request for change.
//
// Stock Crossplane core v2.4.2 with its default of 100 concurrent
// reconciles fails it: it applies stale XR conditions (docs/convergence.md),
// so XRs lose Ready dozens of times while converging and a few still loop in
// the quiet window. With the flags docs/install.md recommends
// (platform.CoreArgs, the suite's default) it passes, and so it runs in
// make test; it also runs on the patched core (the suite run after
// eval "$(WIDGET_CORE=patched bash hack/tools.sh env)"), and on any core
// when E2E_CONVERGENCE=1 asks for it.
func TestConvergence(t *testing.T) {
	if os.Getenv("E2E_CONVERGENCE") == "" && !patchedCore() && !recommendedCore() {
		t.Skip("stock core v2.4.2 with its default of 100 concurrent reconciles fails the convergence guard (core's stale-conditions loop); it runs with the suite's default flags (docs/install.md), on the patched core (WIDGET_CORE=patched) or with E2E_CONVERGENCE=1")
	}
	s := newScenario(t, true)
	// Not while another scenario changes a namespace policy: each change
	// has core reconcile every XR of the cluster (suite.policies), which
	// asks for changes this scenario's quiet window would count.
	suite.policies.Lock()
	t.Cleanup(suite.policies.Unlock)
	const n = 30
	cfg := suite.c.RESTConfig()
	claimOf := "crossplane.io/claim-namespace=" + s.ns
	watched := []struct {
		what, ns, selector string
		gvr                schema.GroupVersionResource
	}{
		{"WidgetClaim", s.ns, "", claimsGVR},
		{"XWidget", s.ns, "", xwidgetsGVR},
		{"legacy XWidget", "", claimOf, schema.GroupVersionResource{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Resource: "xwidgets"}},
		{"Widget", s.ns, "", schema.GroupVersionResource{Group: "widget.m.widgetco.io", Version: "v1beta1", Resource: "widgets"}},
		{"WidgetKey", s.ns, "", schema.GroupVersionResource{Group: "widget.m.widgetco.io", Version: "v1beta1", Resource: "widgetkeys"}},
		{"cluster Widget", "", claimOf, schema.GroupVersionResource{Group: "widget.widgetco.io", Version: "v1beta1", Resource: "widgets"}},
		{"cluster WidgetKey", "", claimOf, schema.GroupVersionResource{Group: "widget.widgetco.io", Version: "v1beta1", Resource: "widgetkeys"}},
		{"Secret", s.ns, "", schema.GroupVersionResource{Version: "v1", Resource: "secrets"}},
		{"Event", s.ns, "", schema.GroupVersionResource{Version: "v1", Resource: "events"}},
	}
	recs := make(map[string]*platform.ReadyRecorder, len(watched))
	for _, w := range watched {
		r, err := platform.RecordReady(s.ctx, cfg, w.gvr, w.ns, w.selector)
		if err != nil {
			t.Fatal(err)
		}
		recs[w.what] = r
		t.Cleanup(func() { _, _ = r.Stop() })
	}
	opensBefore := circuitBreakerOpens(t, s.ctx)
	coreLogFrom := len(coreLog(t, s.ctx))

	// 2n objects, created by 8 concurrent clients.
	objs := make([]client.Object, 0, 2*n)
	for i := range n {
		objs = append(objs, s.claim(fmt.Sprintf("c%02d", i), map[string]any{"keys": int64(1)}), s.xwidget(fmt.Sprintf("x%02d", i), map[string]any{"keys": int64(1)}))
	}
	begin := time.Now()
	s.createConcurrently(8, objs...)
	s.eventually(fmt.Sprintf("%d WidgetClaims and %d XWidgets Ready", n, n), func() error {
		if !recs["WidgetClaim"].AllReady(n) || !recs["XWidget"].AllReady(n) {
			return errors.New("not all Ready yet")
		}
		return nil
	})
	readyIn := time.Since(begin)
	// Core records the Events of the reconcile that made the last one
	// Ready after that reconcile's status write, which the watch may
	// deliver first: under load they were created just inside the window
	// (an XWidget's one Available event). They belong to the transition.
	time.Sleep(2 * time.Second)

	// The quiet window is delimited by revisions, not by when the watches
	// deliver: under load they deliver late, and a write from before the
	// window must not count in it.
	quiet := time.Now()
	quietRev, err := platform.Revision(s.ctx, suite.kube, s.ns)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.ctx.Done():
		t.Fatal(s.ctx.Err())
	case <-time.After(convergenceQuiet):
	}
	endRev, err := platform.Revision(s.ctx, suite.kube, s.ns)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // for the watches to deliver up to endRev

	for _, w := range watched {
		r := recs[w.what]
		for _, l := range r.Lost() {
			t.Errorf("%s %s lost Ready at %s (%s): %s", w.what, l.Name, l.At.Format(time.RFC3339Nano), l.Reason, l.Message)
		}
		win := platform.Window(r.ChangesAfter(quietRev), quietRev, endRev, quiet.Truncate(time.Second))
		if len(win.Churn) > 0 {
			t.Errorf("%d writes to %ss in the %s after all were Ready, with nothing asking for a change: %s", len(win.Churn), w.what, convergenceQuiet, summarize(win.Churn))
		}
		if len(win.Empty) > 0 {
			t.Logf("%d %ss were written once in the quiet window without any change but their resourceVersion (a writer re-applying what they hold; a second such write would fail): %s", len(win.Empty), w.what, summarize(win.Empty))
		}
		if len(win.Late) > 0 {
			t.Logf("%d %ss that occurred before all were Ready were written in the quiet window (their sources' event queues catching up): %s", len(win.Late), w.what, summarize(win.Late))
		}
	}
	// Core's metric counts every scenario's XRs (TestQuotaBurst's 50
	// XWidgets, each watching its namespace's XWidgets, open some); its
	// log names the XR whose breaker opened.
	if opens := breakerOpens(t, s, coreLogFrom, claimOf); len(opens) > 0 {
		t.Errorf("Crossplane's XR circuit breaker was open %d times for this scenario's XRs: %s", len(opens), strings.Join(opens[:min(len(opens), 10)], "; "))
	}
	if suite.c.Local() {
		t.Logf("Crossplane's XR circuit breakers opened %.0f times in the cluster meanwhile (every scenario's XRs)", circuitBreakerOpens(t, s.ctx)-opensBefore)
	}

	// What it took, for the record (not asserted).
	per := func(what string, until time.Time) float64 {
		return float64(len(recs[what].ChangesSince(begin))-len(recs[what].ChangesSince(until))) / n
	}
	t.Logf("MEASURED convergence: %d claims and %d XWidgets Ready %s after the first create; writes per object until then: claim %.1f, XWidget %.1f, legacy XWidget %.1f, Widget %.1f, WidgetKey %.1f; events per claim+XWidget %.1f",
		n, n, readyIn.Round(100*time.Millisecond), per("WidgetClaim", quiet), per("XWidget", quiet), per("legacy XWidget", quiet),
		(per("Widget", quiet)+per("cluster Widget", quiet))/2, (per("WidgetKey", quiet)+per("cluster WidgetKey", quiet))/2, per("Event", quiet)/2)
}

// patchedCore reports whether the suite runs the Crossplane core that
// WIDGET_CORE=patched bash hack/tools.sh builds (tools/crossplane/patches).
// recommendedCore reports whether core runs with every flag docs/install.md
// recommends.
func recommendedCore() bool {
	args := coreArgs()
	for _, a := range platform.CoreArgs() {
		if !slices.Contains(args, a) {
			return false
		}
	}
	return true
}

func patchedCore() bool {
	return filepath.Base(os.Getenv("CROSSPLANE_BIN")) == "crossplane-patched"
}

// circuitBreakerOpens is how often Crossplane's XR circuit breakers have
// opened so far; 0 on a cluster of the user's own, whose core's pod
// address this machine may not reach.
func circuitBreakerOpens(t *testing.T, ctx context.Context) float64 {
	t.Helper()
	if !suite.c.Local() {
		return 0
	}
	url, err := suite.c.CoreMetricsURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := prom.Scrape(ctx, &http.Client{Timeout: 10 * time.Second}, url)
	if err != nil {
		t.Fatalf("cannot scrape Crossplane core's metrics: %v", err)
	}
	return ss.Sum("circuit_breaker_opens_total", nil)
}

// coreLog is what Crossplane core has logged so far.
func coreLog(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	b, err := suite.c.CoreLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// breakerOpens returns the XR circuit breaker openings core logged after
// offset from for the scenario's XRs: its namespace's, and the
// cluster-scoped XRs of its claims (selected by claimOf), as "XR, triggered
// by".
func breakerOpens(t *testing.T, s *scenario, from int, claimOf string) []string {
	t.Helper()
	legacy := &unstructured.UnstructuredList{}
	legacy.SetGroupVersionKind(schema.GroupVersionKind{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Kind: "XWidgetList"})
	sel, err := labels.Parse(claimOf)
	if err != nil {
		t.Fatal(err)
	}
	if err := suite.kube.List(s.ctx, legacy, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatalf("cannot list the scenario's legacy XRs: %v", err)
	}
	mine := map[string]bool{}
	for _, x := range legacy.Items {
		mine[x.GetName()] = true
	}
	log := coreLog(t, s.ctx)
	if from > len(log) {
		from = 0 // core restarted in a new pod
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(log[from:]))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var l struct {
			Msg     string `json:"msg"`
			Request struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"request"`
			TriggeredBy string `json:"triggered-by"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "Circuit breaker is open" {
			continue
		}
		if l.Request.Namespace == s.ns || (l.Request.Namespace == "" && mine[l.Request.Name]) {
			out = append(out, l.Request.Name+" by "+l.TriggeredBy)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("cannot read core's log: %v", err)
	}
	return out
}

// summarize counts changes by object (an Event's by its object and reason),
// most first, at most 10, each with the fields its writes changed (at most
// three), so that a failure says what kept changing.
func summarize(cs []platform.Change) string {
	n := map[string]int{}
	fields := map[string][]string{}
	for _, c := range cs {
		k := c.Name
		if c.Detail != "" {
			k = c.Detail
		}
		n[k]++
		for _, f := range c.Fields {
			if len(fields[k]) < 3 && !slices.Contains(fields[k], f) {
				fields[k] = append(fields[k], f)
			}
		}
	}
	names := make([]string, 0, len(n))
	for k := range n {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return n[names[i]] > n[names[j]] || n[names[i]] == n[names[j]] && names[i] < names[j]
	})
	if len(names) > 10 {
		names = names[:10]
	}
	parts := make([]string, 0, len(names))
	for _, k := range names {
		p := fmt.Sprintf("%s x%d", k, n[k])
		if len(fields[k]) > 0 {
			p += " (" + strings.Join(fields[k], ", ") + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
