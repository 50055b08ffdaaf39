package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
)

// failoverClaims is how many claims and XWidgets TestProviderLeaderFailover
// creates (half each).
const failoverClaims = 50

// TestProviderRunsAsCrossplaneRunsIt checks the provider runs as
// Crossplane's Deployment runtime runs it with the shipped
// DeploymentRuntimeConfig: two replicas of the package's image, one of them
// leading, and only the leader reconciling.
func TestProviderRunsAsCrossplaneRunsIt(t *testing.T) {
	s := newScenario(t, false)
	pods := suite.p.Provider.Pods()
	if len(pods) != 2 {
		t.Fatalf("provider-widget has %d pods, want the 2 replicas of examples/runtime", len(pods))
	}
	leader := s.leader()
	for _, p := range pods {
		n := reconciles(s, p)
		t.Logf("Pod %s (leader %t) reconciled %.0f times", p.Name(), p.Name() == leader.Name(), n)
		switch {
		case p.Name() == leader.Name() && n == 0:
			t.Errorf("leader %s has reconciled nothing", p.Name())
		case p.Name() != leader.Name() && n != 0:
			t.Errorf("standby %s reconciled %.0f times; only the leader may reconcile", p.Name(), n)
		}
	}
}

// TestProviderLeaderFailover kills (SIGKILL) the leading provider replica
// while 50 claims and XWidgets are being created: another replica takes
// over the lease, every one goes Ready, and the Widget API saw exactly one
// create request per widget.
func TestProviderLeaderFailover(t *testing.T) {
	s := newScenario(t, false)
	before := s.leader()
	xrs := make([]*unstructured.Unstructured, 0, failoverClaims)
	for i := range failoverClaims {
		name := fmt.Sprintf("failover-%02d", i)
		if i%2 == 0 {
			xrs = append(xrs, s.claim(name, map[string]any{"keys": int64(1)}))
		} else {
			xrs = append(xrs, s.xwidget(name, map[string]any{"keys": int64(1)}))
		}
	}
	// Created by concurrent clients, as app teams would.
	var wg sync.WaitGroup
	errs := make([]error, len(xrs))
	for i, xr := range xrs {
		wg.Go(func() { errs[i] = suite.kube.Create(s.ctx, xr) })
	}
	s.eventually("the leader's first creates committed in the Widget API", func() error {
		ws, err := s.scenarioWidgets()
		if err != nil {
			return err
		}
		if len(ws) < 5 {
			return errors.Errorf("%d widgets of the scenario in the Widget API, waiting for 5", len(ws))
		}
		return nil
	})
	if err := before.Kill(); err != nil {
		t.Fatalf("cannot kill the leader %s: %v", before.Name(), err)
	}
	killed := time.Now()
	ws, _ := s.scenarioWidgets()
	t.Logf("Killed the leader %s (SIGKILL) with %d of %d widgets created", before.Name(), len(ws), failoverClaims)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("cannot create the claims and XWidgets: %v", err)
	}

	holder := leaseHolder(s)
	var took time.Duration
	s.eventually("another replica holds the lease", func() error {
		h := leaseHolder(s)
		if h == holder {
			return errors.Errorf("the lease is still held by %q", h)
		}
		took = time.Since(killed)
		t.Logf("MEASURED leader failover: %s took the lease %s after the leader was killed (lease duration 15s)", h, took.Round(100*time.Millisecond))
		return nil
	})
	for _, xr := range xrs {
		s.waitReady(xr)
	}
	t.Logf("TIMING: all %d claims and XWidgets Ready %s after the leader was killed", failoverClaims, time.Since(killed).Round(100*time.Millisecond))
	s.checkOneWidgetEach(xrs)
}

// TestAPIServerRestart stops kube-apiserver for a minute while claims and
// XWidgets are being created and resized, then starts it again: core, the
// provider and the function recover by themselves (the node restarts what
// exits, as a kubelet would), and every one reaches its desired state with
// one widget each.
func TestAPIServerRestart(t *testing.T) {
	s := newScenario(t, false)
	const n = 10
	var xrs []*unstructured.Unstructured
	for i := range n {
		name := fmt.Sprintf("restart-%02d", i)
		if i%2 == 0 {
			xrs = append(xrs, s.claim(name, map[string]any{"size": "small", "keys": int64(1)}))
		} else {
			xrs = append(xrs, s.xwidget(name, map[string]any{"size": "small", "keys": int64(1)}))
		}
	}
	// The first half exist and are Ready; the second half are being created
	// and the first half resized when the API server goes.
	s.create(objects(xrs[:n/2])...)
	for _, xr := range xrs[:n/2] {
		s.waitReady(xr)
	}
	s.create(objects(xrs[n/2:])...)
	for _, xr := range xrs[:n/2] {
		s.mergePatch(xr, `{"spec":{"size":"medium"}}`)
	}
	// It refuses connections from the moment it is told to stop, and may
	// take seconds to drain: the downtime counts from then.
	stopped := time.Now()
	if err := suite.h.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped after %s; starting it again %s after it was told to stop", time.Since(stopped).Round(100*time.Millisecond), apiServerDowntime)
	select {
	case <-time.After(time.Until(stopped.Add(apiServerDowntime))):
	case <-s.ctx.Done():
		_ = suite.h.StartAPIServer()
		t.Fatal("scenario ended while kube-apiserver was down")
	}
	if err := suite.h.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	t.Logf("kube-apiserver serves again after %s down", started.Sub(stopped).Round(100*time.Millisecond))

	for i, xr := range xrs {
		want := "small"
		if i < n/2 {
			want = "medium"
		}
		s.eventually(fmt.Sprintf("%s %s Ready at size %s", xr.GetKind(), xr.GetName(), want), func() error {
			if err := s.get(xr); err != nil {
				return err
			}
			if err := isReady(xr); err != nil {
				return err
			}
			return s.widgetState(status(xr, "externalName"), want)
		})
	}
	t.Logf("MEASURED recovery after kube-apiserver came back: every claim and XWidget Ready at its desired size %s later", time.Since(started).Round(100*time.Millisecond))
	for _, rt := range []*harness.Runtime{suite.p.Provider, suite.p.Function} {
		if !rt.Running() {
			t.Errorf("a package runtime has no ready pod after the restart (pods: %s)", podNames(rt.Pods()))
		}
	}
	s.checkOneWidgetEach(xrs)
}

// apiServerDowntime is how long TestAPIServerRestart keeps kube-apiserver
// down from when it is told to stop: longer than the provider's renew
// deadline in the suite (10s), so the leader gives up leading.
const apiServerDowntime = 15 * time.Second

func objects(us []*unstructured.Unstructured) []client.Object {
	out := make([]client.Object, 0, len(us))
	for _, u := range us {
		out = append(out, u)
	}
	return out
}

// checkOneWidgetEach checks the Widget API holds exactly one widget per
// claim or XWidget, each with one key, and received exactly one create
// request for each (none refused as a duplicate).
func (s *scenario) checkOneWidgetEach(xrs []*unstructured.Unstructured) {
	s.t.Helper()
	ws, err := s.scenarioWidgets()
	if err != nil {
		s.t.Fatal(err)
	}
	if len(ws) != len(xrs) {
		s.t.Errorf("Widget API holds %d widgets of the scenario for %d claims and XWidgets, want one each", len(ws), len(xrs))
	}
	creates, err := createRequests()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, xr := range xrs {
		if err := s.get(xr); err != nil {
			s.t.Fatal(err)
		}
		name := status(xr, "externalName")
		if got := creates[name]; len(got) != 1 || got[0] != "201" {
			s.t.Errorf("%s %s: the Widget API answered the create requests for widget %q with %v, want exactly one 201", xr.GetKind(), xr.GetName(), name, got)
		}
		if k, err := s.keyNames(name); err != nil || len(k) != 1 {
			s.t.Errorf("widget %s has keys %v (error %v), want exactly 1", name, k, err)
		}
	}
}

// createRequests reads the Widget API's access log: the statuses of the
// create requests for each widget, in order.
func createRequests() (map[string][]string, error) {
	f, err := os.Open(filepath.Join(suite.h.Dir(), "logs", "widget-api.log"))
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the Widget API's access log")
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "method=POST path=/v1/widgets widget=") {
			continue
		}
		var widget, code string
		for _, fld := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(fld, "widget="); ok {
				widget = v
			}
			if v, ok := strings.CutPrefix(fld, "status="); ok {
				code = v
			}
		}
		out[widget] = append(out[widget], code)
	}
	return out, errors.Wrap(sc.Err(), "cannot read the Widget API's access log")
}

// leader returns the provider pod that leads.
func (s *scenario) leader() *harness.Pod {
	s.t.Helper()
	var p *harness.Pod
	s.eventually("a provider-widget replica leads", func() error {
		var err error
		p, err = suite.p.Leader(s.ctx)
		return err
	})
	return p
}

// leaseHolder is the holder identity of provider-widget's lease, or "".
func leaseHolder(s *scenario) string {
	h, _ := suite.p.LeaseHolder(s.ctx)
	return h
}

// reconciles is how many reconciles a provider pod's controllers have run.
func reconciles(s *scenario, p *harness.Pod) float64 {
	s.t.Helper()
	addr, err := p.Forward(platform.MetricsPort)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	ss, err := prom.Scrape(ctx, &http.Client{Timeout: 10 * time.Second}, "http://"+addr+"/metrics")
	if err != nil {
		s.t.Fatalf("cannot scrape pod %s's metrics: %v", p.Name(), err)
	}
	if !ss.Has("go_goroutines") {
		s.t.Fatalf("pod %s's metrics lack go_goroutines; is that its metrics endpoint?", p.Name())
	}
	return ss.Sum("controller_runtime_reconcile_total", nil)
}

// podNames lists pods for messages.
func podNames(ps []*harness.Pod) string {
	n := make([]string, 0, len(ps))
	for _, p := range ps {
		n = append(n, p.Name())
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}
