//go:build linux

package e2e_test

import (
	"bufio"
	"cmp"
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

	corev1 "k8s.io/api/core/v1"

	coordinationv1 "k8s.io/api/coordination/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
)

// failoverClaims is how many claims and XWidgets TestProviderLeaderFailover
// creates (half each).
const failoverClaims = 50

// TestProviderRunsAsCrossplaneRunsIt checks the provider runs as
// Crossplane's Deployment runtime runs it with the shipped
// DeploymentRuntimeConfig: two replicas of the package's image, one of them
// leading, and only the leader reconciling; and that every pod of the
// platform - CoreDNS, core, the RBAC manager, the provider's replicas, the
// function - runs on the node.
func TestProviderRunsAsCrossplaneRunsIt(t *testing.T) {
	s := newScenario(t, false)
	s.checkPlatformPods()
	// Work for the leader: scenarios before this one may have replaced
	// the provider's pods (a rolling update, say) after their last change.
	xr := s.xwidget("runs", map[string]any{"keys": int64(1)})
	s.create(xr)
	s.waitReady(xr)
	pods := suite.provider.Pods()
	if len(pods) != 2 {
		t.Fatalf("provider-widget has %d pods, want the 2 replicas of examples/runtime", len(pods))
	}
	leader := s.leader()
	needsNode(t, "reads each replica's metrics at its pod's address")
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

// TestProviderLeaderFailover kills (SIGKILL) every process of the leading
// provider container while 50 claims and XWidgets are being created: the
// lease expires and another replica takes it, kubelet restarts the
// container in the same pod, every one goes Ready, and the Widget API saw
// exactly one create request per widget.
func TestProviderLeaderFailover(t *testing.T) {
	needsNode(t, "kills the leader's processes")
	s := newScenario(t, false)
	before := s.leader()
	holder := leaseHolder(s)
	restarts := restartCount(before.Object())
	xrs := s.createDuringFirstCommits(failoverClaims)
	if err := before.Kill(); err != nil {
		t.Fatalf("cannot kill the leader %s: %v", before.Name(), err)
	}
	killed := time.Now()
	ws, _ := s.scenarioWidgets()
	t.Logf("Killed the leader %s (SIGKILL) with %d of %d widgets created", before.Name(), len(ws), failoverClaims)
	took := s.waitNewLeader(holder, killed)
	t.Logf("MEASURED leader failover: another replica took the lease %s after the leader was killed (lease duration 15s)", took.Round(100*time.Millisecond))
	for _, xr := range xrs {
		s.waitReady(xr)
	}
	t.Logf("TIMING: all %d claims and XWidgets Ready %s after the leader was killed", failoverClaims, time.Since(killed).Round(100*time.Millisecond))
	s.checkOneWidgetEach(xrs)
	s.eventually("kubelet to restart the killed container", func() error {
		p, err := before.Current(s.ctx)
		if err != nil {
			return err
		}
		if n := restartCount(p); n <= restarts || !podReady(p) {
			return errors.Errorf("restarts %d (were %d), ready %t", n, restarts, podReady(p))
		}
		return nil
	})
}

// TestLeaderPodDeleted deletes the leading provider pod while claims and
// XWidgets are being created, as a node drain or `kubectl delete pod` does:
// kubelet stops it gracefully, it hands its lease over at once, the
// Deployment replaces it, and every claim and XWidget goes Ready with one
// widget each.
func TestLeaderPodDeleted(t *testing.T) {
	s := newScenario(t, false)
	leader := s.leader()
	holder := leaseHolder(s)
	xrs := s.createDuringFirstCommits(10)
	deleted := time.Now()
	if err := suite.kube.Delete(s.ctx, leader.Object()); err != nil {
		t.Fatalf("cannot delete the leader %s: %v", leader.Name(), err)
	}
	took := s.waitNewLeader(holder, deleted)
	t.Logf("MEASURED leader pod deleted: another replica took the lease %s after the delete (graceful stop; lease duration 15s)", took.Round(100*time.Millisecond))
	for _, xr := range xrs {
		s.waitReady(xr)
	}
	t.Logf("MEASURED all %d claims and XWidgets Ready %s after the leader's pod was deleted", len(xrs), time.Since(deleted).Round(100*time.Millisecond))
	s.checkOneWidgetEach(xrs)
	s.waitProviderPods(2)
}

// checkPlatformPods checks every pod of the platform Runs on the node: one
// each of CoreDNS, core, the RBAC manager and the function, the provider's
// two replicas.
func (s *scenario) checkPlatformPods() {
	s.t.Helper()
	pods := &corev1.PodList{}
	if err := suite.kube.List(s.ctx, pods); err != nil {
		s.t.Fatal(err)
	}
	want := map[string]int{"coredns-": 1, "crossplane-": 1, "crossplane-rbac-manager-": 1, platform.ProviderName + "-": 2, platform.FunctionName + "-": 1}
	node := ""
	if suite.c.Local() {
		node = suite.c.Node.Name()
	} else {
		// A cluster of the user's own runs its DNS as it likes, on
		// nodes of its own.
		delete(want, "coredns-")
	}
	got := map[string]int{}
	for _, p := range pods.Items {
		longest := ""
		for prefix := range want {
			if strings.HasPrefix(p.Name, prefix) && len(prefix) > len(longest) {
				longest = prefix
			}
		}
		if longest == "" {
			continue
		}
		got[longest]++
		if p.Spec.NodeName == "" || node != "" && p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning {
			s.t.Errorf("pod %s/%s: %s on %q, want Running on %s", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, cmp.Or(node, "a node"))
		}
	}
	for prefix, n := range want {
		if got[prefix] != n {
			s.t.Errorf("%d pods %s*, want %d", got[prefix], prefix, n)
		}
	}
}

// createDuringFirstCommits creates n claims and XWidgets (half each) with
// concurrent clients, as app teams would, and returns them once the first
// widgets are committed in the Widget API: the provider is mid-way.
func (s *scenario) createDuringFirstCommits(n int) []*unstructured.Unstructured {
	s.t.Helper()
	xrs := make([]*unstructured.Unstructured, 0, n)
	for i := range n {
		name := fmt.Sprintf("failover-%02d", i)
		if i%2 == 0 {
			xrs = append(xrs, s.claim(name, map[string]any{"keys": int64(1)}))
		} else {
			xrs = append(xrs, s.xwidget(name, map[string]any{"keys": int64(1)}))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(xrs))
	for i, xr := range xrs {
		wg.Go(func() { errs[i] = suite.kube.Create(s.ctx, xr) })
	}
	first := max(2, n/10)
	s.eventually("the leader's first creates committed in the Widget API", func() error {
		ws, err := s.scenarioWidgets()
		if err != nil {
			return err
		}
		if len(ws) < first {
			return errors.Errorf("%d widgets of the scenario in the Widget API, waiting for %d", len(ws), first)
		}
		return nil
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.t.Fatalf("cannot create the claims and XWidgets: %v", err)
	}
	return xrs
}

// waitNewLeader waits until someone other than holder holds the lease and
// returns how long after since that was.
func (s *scenario) waitNewLeader(holder string, since time.Time) time.Duration {
	s.t.Helper()
	var took time.Duration
	s.eventually("another replica holds the lease", func() error {
		if h := leaseHolder(s); h == "" || h == holder {
			return errors.Errorf("the lease is held by %q", h)
		}
		took = time.Since(since)
		return nil
	})
	return took
}

// waitProviderPods waits until n provider pods are ready.
func (s *scenario) waitProviderPods(n int) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("%d ready provider-widget pods", n), func() error {
		pods := suite.provider.Pods()
		got := 0
		for _, p := range pods {
			if p.Ready() {
				got++
			}
		}
		if got != n {
			return errors.Errorf("%d of %d pods ready", got, len(pods))
		}
		return nil
	})
}

// podReady is true when p is Ready.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restartCount is how often kubelet restarted p's containers.
func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, st := range p.Status.ContainerStatuses {
		n += st.RestartCount
	}
	return n
}

// TestAPIServerRestart stops kube-apiserver for a minute while claims and
// XWidgets are being created and resized, then starts it again: core, the
// provider and the function recover by themselves (kubelet restarts what
// exits), and every one reaches its desired state with
// one widget each.
func TestAPIServerRestart(t *testing.T) {
	needsNode(t, "stops and starts kube-apiserver")
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
	if err := suite.c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped after %s; starting it again %s after it was told to stop", time.Since(stopped).Round(100*time.Millisecond), apiServerDowntime)
	select {
	case <-time.After(time.Until(stopped.Add(apiServerDowntime))):
	case <-s.ctx.Done():
		_ = suite.c.StartAPIServer()
		t.Fatal("scenario ended while kube-apiserver was down")
	}
	if err := suite.c.StartAPIServer(); err != nil {
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
	for _, rt := range []*cluster.Runtime{suite.provider, suite.function} {
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
	f, err := os.Open(filepath.Join(suite.c.Dir(), "logs", "widget-api.log"))
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
func (s *scenario) leader() *cluster.Pod {
	s.t.Helper()
	var p *cluster.Pod
	s.eventually("a provider-widget replica leads", func() error {
		holder := leaseHolder(s)
		for _, pod := range suite.provider.Pods() {
			// The holder identity is <hostname>_<uuid>; a pod's
			// hostname is its name.
			if strings.HasPrefix(holder, pod.Name()+"_") {
				p = pod
				return nil
			}
		}
		return errors.Errorf("no provider-widget pod holds the lease (holder %q)", holder)
	})
	return p
}

// leaseHolder is the holder identity of provider-widget's lease, or "".
func leaseHolder(s *scenario) string {
	l := &coordinationv1.Lease{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: cluster.CrossplaneNamespace, Name: platform.LeaseName}, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// reconciles is how many reconciles a provider pod's controllers have run.
func reconciles(s *scenario, p *cluster.Pod) float64 {
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
func podNames(ps []*cluster.Pod) string {
	n := make([]string, 0, len(ps))
	for _, p := range ps {
		n = append(n, p.Name())
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}
