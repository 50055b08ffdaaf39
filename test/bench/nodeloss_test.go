//go:build linux

package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

func init() { register(55, "nodeloss", nodeLossSection) }

// nodeLossGrace is the two-node cluster's NodeLossGrace: a node is
// NotReady 20 s after its last heartbeat, and its pods are evicted 20 s
// later (Kubernetes' defaults: 50 s and 300 s).
const (
	nodeLossGrace   = 20 * time.Second
	nodeLossNS      = "bench-nodeloss"
	nodeLossTimeout = 5 * time.Minute
)

// A nodeLoss is what one lost node cost, each from the moment it stopped.
type nodeLoss struct {
	// placement is which pods ran on the lost node.
	placement []string
	takeover  time.Duration // until the standby on the other node leads
	notReady  time.Duration // until the Node is NotReady
	ready     time.Duration // until every claim created at the loss is Ready
	replaced  time.Duration // until every Deployment of the platform is ready again off the lost node
	lost      int           // claims created before the loss not Ready at the end
	widgets   int           // widgets the Widget API holds at the end
	claims    int           // claims created in all
}

// nodeLossSection runs the provider's two replicas on two nodes of one
// cluster, stops the node of the leader (kubelet and its containers, as a
// lost machine), creates claims at once, and measures until the standby
// on the surviving node leads, until the claims are Ready, and until the
// lost node's pods run again on the surviving node.
func nodeLossSection(t *testing.T, b *bench) string {
	n := envInt("WIDGET_BENCH_NODELOSS_CLAIMS", 10)
	runs := envInt("WIDGET_BENCH_NODELOSS_RUNS", 3)
	rs := make([]nodeLoss, 0, runs)
	for i := range runs {
		r := loseANode(t, b, n)
		t.Logf("nodeloss %d: new leader %s, NotReady %s, claims Ready %s, Deployments back %s; the lost node ran %s", i+1, r.takeover, r.notReady, r.ready, r.replaced, strings.Join(r.placement, ", "))
		rs = append(rs, r)
	}
	return nodeLossMarkdown(rs, n)
}

// loseANode runs one node loss on a fresh cluster of two nodes.
func loseANode(t *testing.T, b *bench, n int) nodeLoss {
	env := startE2EFor(t, b, e2eSetup{
		providerArgs:  []string{"--lease-duration=" + failoverLease.String(), "--renew-deadline=" + failoverRenew.String()},
		nodes:         2,
		nodeLossGrace: nodeLossGrace,
	})
	defer env.stop()
	ctx := t.Context()
	if err := platform.EnsureNamespace(ctx, env.c.Client(), nodeLossNS); err != nil {
		t.Fatal(err)
	}
	claim := env.claimMaker(t)
	env.warmUp(ctx, t, claim(nodeLossNS, "warm-up"))
	before := make([]*unstructured.Unstructured, 0, n)
	for i := range n {
		before = append(before, claim(nodeLossNS, fmt.Sprintf("before-%d", i)))
	}
	if err := env.createAndWait(ctx, before); err != nil {
		t.Fatal(err)
	}
	lost, err := env.leaderOnFurtherNode(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	r, err := env.loseNode(ctx, t, lost, claim, before)
	if err != nil {
		t.Fatalf("%v (logs in %s/logs)", err, env.dir)
	}
	return r
}

// leaderOnFurtherNode returns the node of the provider's leader once it is
// not the first (which StopNode cannot stop) and the standby runs on
// another node: it deletes a leader on the first node, whose standby takes
// over, and the replacement the scheduler spreads.
func (e *e2eEnv) leaderOnFurtherNode(ctx context.Context, t *testing.T) (string, error) {
	for range 5 {
		waitReplicas(e, 2, time.Now().Add(nodeLossTimeout)) //nolint:contextcheck // Pods takes no context: it bounds its own List (30s)
		leader, err := e.leader(ctx)
		if err != nil {
			return "", err
		}
		nodes := map[string]bool{}
		for _, p := range e.provider.Pods() { //nolint:contextcheck // Pods takes no context: it bounds its own List (30s)
			nodes[p.Object().Spec.NodeName] = true
		}
		where := leader.Object().Spec.NodeName
		if where != e.c.Node.Name() && len(nodes) == 2 {
			return where, nil
		}
		t.Logf("nodeloss: leader %s on %s, replicas on %d nodes; deleting the leader's pod", leader.Name(), where, len(nodes))
		if err := e.kube.Delete(ctx, leader.Object()); err != nil {
			return "", err
		}
		time.Sleep(3 * time.Second)
	}
	return "", fmt.Errorf("the provider's leader never ran on the second node beside a standby on the first")
}

// loseNode stops the node name, creates len(before) claims at once, and
// waits until all of them, and those created before, are Ready and the
// provider has two ready replicas again.
func (e *e2eEnv) loseNode(ctx context.Context, t *testing.T, name string, claim func(ns, name string) *unstructured.Unstructured, before []*unstructured.Unstructured) (nodeLoss, error) {
	var r nodeLoss
	pods := &corev1.PodList{}
	if err := e.kube.List(ctx, pods); err != nil {
		return r, err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == name {
			r.placement = append(r.placement, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(r.placement)
	holder := e.leaseHolder(ctx)
	if err := e.c.StopNode(name); err != nil { //nolint:contextcheck // a node's teardown runs to the end whatever ctx
		return r, err
	}
	stopped := time.Now()
	t.Logf("nodeloss: stopped node %s, which ran %s", name, strings.Join(r.placement, ", "))
	after := make([]*unstructured.Unstructured, 0, len(before))
	for i := range before {
		c := claim(nodeLossNS, fmt.Sprintf("after-%d", i))
		if err := e.kube.Create(ctx, c); err != nil {
			return r, err
		}
		after = append(after, c)
	}
	deadline := stopped.Add(nodeLossTimeout)
	for r.takeover == 0 || r.notReady == 0 || r.ready == 0 || r.replaced == 0 {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("after %s: new leader %s, node NotReady %s, claims Ready %s, replicas back %s", nodeLossTimeout, r.takeover, r.notReady, r.ready, r.replaced)
		}
		if h := e.leaseHolder(ctx); r.takeover == 0 && h != "" && h != holder {
			r.takeover = time.Since(stopped)
		}
		if r.notReady == 0 && !nodeReady(ctx, e.kube, name) {
			r.notReady = time.Since(stopped)
		}
		if r.ready == 0 && allClaimsReady(ctx, e.kube, after) {
			r.ready = time.Since(stopped)
		}
		if r.replaced == 0 && deploymentsBack(ctx, e.kube, name) {
			r.replaced = time.Since(stopped)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range before {
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil || !claimReady(c) {
			r.lost++
		}
	}
	api, err := widgetapi.New(e.widgets.URL, widgetapi.WithToken(e2eToken))
	if err != nil {
		return r, err
	}
	l, err := api.ListWidgets(ctx, widgetapi.ListWidgetsOptions{Limit: 500})
	if err != nil {
		return r, err
	}
	r.widgets, r.claims = len(l.Items), 1+len(before)+len(after)
	return r, nil
}

func nodeReady(ctx context.Context, kc client.Client, name string) bool {
	n := &corev1.Node{}
	if err := kc.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func allClaimsReady(ctx context.Context, kc client.Client, cs []*unstructured.Unstructured) bool {
	for _, c := range cs {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil || !claimReady(c) {
			return false
		}
	}
	return true
}

// deploymentsBack is true once every Deployment of Crossplane's namespace
// and kube-system has as many ready pods as it wants off the node lost.
func deploymentsBack(ctx context.Context, kc client.Client, lost string) bool {
	for _, ns := range []string{cluster.CrossplaneNamespace, metav1.NamespaceSystem} {
		ds := &appsv1.DeploymentList{}
		pods := &corev1.PodList{}
		if kc.List(ctx, ds, client.InNamespace(ns)) != nil || kc.List(ctx, pods, client.InNamespace(ns)) != nil {
			return false
		}
		for _, d := range ds.Items {
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil {
				return false
			}
			ready := int32(0)
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Spec.NodeName != lost && sel.Matches(labels.Set(p.Labels)) && podReady(&p) {
					ready++
				}
			}
			if ready < ptr.Deref(d.Spec.Replicas, 1) {
				return false
			}
		}
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyReplicas is how many of the provider's pods are ready.
func readyReplicas(e *e2eEnv) int {
	n := 0
	for _, p := range e.provider.Pods() {
		if p.Ready() {
			n++
		}
	}
	return n
}

// waitReplicas waits until the provider has want ready pods, or until.
func waitReplicas(e *e2eEnv, want int, until time.Time) {
	for readyReplicas(e) != want && time.Now().Before(until) {
		time.Sleep(250 * time.Millisecond)
	}
}

// createAndWait creates cs and waits until all are Ready.
func (e *e2eEnv) createAndWait(ctx context.Context, cs []*unstructured.Unstructured) error {
	for _, c := range cs {
		if err := e.kube.Create(ctx, c); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(nodeLossTimeout)
	for !allClaimsReady(ctx, e.kube, cs) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d claims not all Ready after %s", len(cs), nodeLossTimeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil
}

func nodeLossMarkdown(rs []nodeLoss, n int) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Node loss\n\n")
	w("A cluster of two nodes on this machine (two kubelets, each with its own containerd, bridge and pod range;\n")
	w("`cluster.Options.NodeLossGrace` %s: a node is NotReady %s after its last heartbeat, and its pods are evicted\n", nodeLossGrace, nodeLossGrace)
	w("%s later), provider-widget's two replicas on different nodes with `--lease-duration=%s`. After %d claims are\n", nodeLossGrace, failoverLease, n)
	w("Ready, the leader's node stops as a lost machine would (kubelet and its containers end; nothing tells the API),\n")
	w("%d more claims are created at once, and each figure is from the stop. %d runs, each on a fresh cluster;\n", n, len(rs))
	w("load average %s at the end.\n\n", loadAvg())
	w("| run | the lost node also ran | new leader | Node NotReady | claims created at the stop Ready | Deployments ready again off the lost node | claims lost | widgets for claims |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|\n")
	take, notReady := make([]time.Duration, 0, len(rs)), make([]time.Duration, 0, len(rs))
	ready, back := make([]time.Duration, 0, len(rs)), make([]time.Duration, 0, len(rs))
	for i, r := range rs {
		var also []string
		for _, p := range r.placement {
			if !strings.Contains(p, "provider-widget") {
				also = append(also, podOwner(p))
			}
		}
		w("| %d | %s | %s | %s | %s | %s | %d | %d / %d |\n", i+1, strings.Join(also, ", "), secs(r.takeover), secs(r.notReady), secs(r.ready), secs(r.replaced), r.lost, r.widgets, r.claims)
		take, notReady = append(take, r.takeover), append(notReady, r.notReady)
		ready, back = append(ready, r.ready), append(back, r.replaced)
	}
	w("| median | | %s | %s | %s | %s | | |\n\n", secs(medianD(take)), secs(medianD(notReady)), secs(medianD(ready)), secs(medianD(back)))
	w("The standby leads once the lost leader's lease expires. Claims wait for whatever else the lost node ran\n")
	w("(Crossplane core, function-widget, CoreDNS): those pods are replaced only after the node is NotReady and\n")
	w("their toleration has passed.\n\n")
	return b.String()
}

// podOwner shortens namespace/pod to the pod's Deployment: its name
// without the ReplicaSet's and the pod's suffixes.
func podOwner(p string) string {
	_, name, _ := strings.Cut(p, "/")
	parts := strings.Split(name, "-")
	if len(parts) > 2 {
		parts = parts[:len(parts)-2]
	}
	return strings.Join(parts, "-")
}
