package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// nodeSyncInterval is how often the node compares what runs with the
// Deployments and Services in Crossplane's namespace.
const nodeSyncInterval = time.Second

// The node is what a cluster gives Crossplane's Deployment runtime, for
// Crossplane's namespace: it plays the Deployment controller, the kubelet,
// kube-proxy and cluster DNS. For every Deployment there (the ones
// Crossplane creates for package revisions, shaped by their
// DeploymentRuntimeConfigs) it runs spec.replicas pods from the pod
// template - the image from the registry, its entrypoint, the environment,
// volumes, user and probes the template gives - and writes the
// Deployment's status, which is what Crossplane reads to report a package
// healthy. For every Service it listens on a loopback IP of its own and
// forwards each connection to a ready pod the Service selects - or to a
// host endpoint it selects (Crossplane core, which runs on the host) - and it
// writes a hosts file that resolves the Service's DNS names to that IP (the
// harness runs Crossplane core with it as /etc/hosts).
type node struct {
	env   *podEnv
	hosts string

	mu       sync.Mutex
	deploys  map[string]*deployment
	services map[string]*service
	// hostEndpoints are processes on the host that Services select as if
	// they were pods.
	hostEndpoints []hostEndpoint
	// held are pod labels ("key=value") whose Deployments run no pods.
	held map[string]bool

	kick   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// A deployment is what the node runs for one Deployment.
type deployment struct {
	name string
	pods []*pod
}

// A service is a Service's loopback IP and listeners.
type service struct {
	name      string
	ip        string
	listeners []net.Listener
	selector  map[string]string
	ports     []corev1.ServicePort
}

// A hostEndpoint is a process that runs on the host rather than in a pod -
// Crossplane core - but that Services select as if it were a ready pod with
// these labels and container ports: a connection for a container port goes
// to the host address that port is served on. It is what lets kube-apiserver
// reach core's webhook server through the Helm chart's crossplane-webhooks
// Service, whose selector matches the labels of core's pod in a cluster.
type hostEndpoint struct {
	name   string
	labels map[string]string
	ports  []corev1.ContainerPort
	// addrs maps a container port to the host address serving it.
	addrs map[int]string
}

// addHostEndpoint makes e an endpoint of every Service that selects its
// labels.
func (n *node) addHostEndpoint(e hostEndpoint) {
	n.mu.Lock()
	n.hostEndpoints = append(n.hostEndpoints, e)
	n.mu.Unlock()
}

func newNode(e *podEnv, hosts string) (*node, error) {
	n := &node{
		env:      e,
		hosts:    hosts,
		deploys:  map[string]*deployment{},
		services: map[string]*service{},
		held:     map[string]bool{},
		kick:     make(chan struct{}, 1),
		cancel:   func() {},
	}
	return n, n.writeHosts()
}

func (n *node) start(ctx context.Context) {
	ctx, n.cancel = context.WithCancel(ctx)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(nodeSyncInterval)
		defer t.Stop()
		failing := false
		for {
			err := n.sync(ctx)
			switch {
			case ctx.Err() != nil:
			case err != nil && !failing:
				// Once per outage: the API server may be away for a while.
				n.env.log.Info("Node cannot sync; retrying every second", "error", err)
				failing = true
			case err == nil && failing:
				n.env.log.Info("Node syncs again")
				failing = false
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-n.kick:
			}
		}
	}()
}

func (n *node) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// stop stops every pod and Service listener.
func (n *node) stop() error {
	n.cancel()
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for _, d := range n.deploys {
		for _, p := range d.pods {
			errs = append(errs, p.stop())
		}
	}
	for _, s := range n.services {
		s.close()
	}
	return errors.Join(errs...)
}

func (n *node) sync(ctx context.Context) error {
	dl := &appsv1.DeploymentList{}
	if err := n.env.kube.List(ctx, dl, client.InNamespace(n.env.namespace)); err != nil {
		return errors.Wrap(err, "cannot list Deployments")
	}
	seen := map[string]bool{}
	errs := make([]error, 0, len(dl.Items)+1)
	for i := range dl.Items {
		d := &dl.Items[i]
		seen[d.Name] = true
		errs = append(errs, n.syncDeployment(ctx, d))
	}
	n.mu.Lock()
	var gone []*deployment
	for name, d := range n.deploys {
		if !seen[name] {
			gone = append(gone, d)
			delete(n.deploys, name)
		}
	}
	n.mu.Unlock()
	for _, d := range gone {
		n.env.log.Info("Deployment deleted; stopping its pods", "deployment", d.name)
		for _, p := range d.pods {
			errs = append(errs, p.stop())
		}
	}
	errs = append(errs, n.syncServices(ctx))
	return errors.Join(errs...)
}

// syncDeployment runs the Deployment's replicas of its current template
// (replacing pods of an older template first: the Recreate strategy) and
// writes its status.
func (n *node) syncDeployment(ctx context.Context, d *appsv1.Deployment) error {
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil
	}
	hash, err := templateHash(d.Spec.Template)
	if err != nil {
		return err
	}
	n.mu.Lock()
	dep, ok := n.deploys[d.Name]
	if !ok {
		dep = &deployment{name: d.Name}
		n.deploys[d.Name] = dep
	}
	want := int(ptr.Deref(d.Spec.Replicas, 1))
	run := want
	if n.heldLocked(d.Spec.Template.Labels) {
		run = 0
	}
	keep := make([]*pod, 0, run)
	drop := make([]*pod, 0, len(dep.pods))
	for _, p := range dep.pods {
		if p.hash == hash && len(keep) < run {
			keep = append(keep, p)
			continue
		}
		drop = append(drop, p)
	}
	dep.pods = keep
	n.mu.Unlock()

	for _, p := range drop {
		n.env.log.Info("Stopping pod", "deployment", d.Name, "pod", p.name)
		_ = p.stop()
	}
	for len(keep) < run {
		p := newPod(n.env, d.Name, hash, d.Spec.Template.Labels, d.Spec.Template.Spec)
		n.env.log.Info("Starting pod", "deployment", d.Name, "pod", p.name)
		p.run(ctx)
		keep = append(keep, p)
	}
	n.mu.Lock()
	dep.pods = keep
	n.mu.Unlock()
	return n.writeStatus(ctx, d, dep, want)
}

// writeStatus writes the Deployment's replica counts and its Available
// condition (maxUnavailable 25%, the default), if they changed.
func (n *node) writeStatus(ctx context.Context, d *appsv1.Deployment, dep *deployment, want int) error {
	ready := 0
	why := "no pod can run (the harness holds them)"
	if len(dep.pods) > 0 {
		why = ""
	}
	for _, p := range dep.pods {
		ok, state := p.status()
		if ok {
			ready++
			continue
		}
		if why == "" {
			why = "pod " + p.name + ": " + state
		}
	}
	avail := corev1.ConditionTrue
	reason, msg := "MinimumReplicasAvailable", "Deployment has minimum availability."
	if ready < want-want/4 {
		avail, reason = corev1.ConditionFalse, "MinimumReplicasUnavailable"
		msg = "Deployment does not have minimum availability: " + why
	}
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            int32(len(dep.pods)),      //nolint:gosec // Small counts.
		UpdatedReplicas:     int32(len(dep.pods)),      //nolint:gosec // Small counts.
		ReadyReplicas:       int32(ready),              //nolint:gosec // Small counts.
		AvailableReplicas:   int32(ready),              //nolint:gosec // Small counts.
		UnavailableReplicas: int32(max(want-ready, 0)), //nolint:gosec // Small counts.
	}
	old := d.Status
	st.Conditions = []appsv1.DeploymentCondition{condition(old.Conditions, appsv1.DeploymentAvailable, avail, reason, msg)}
	if statusEqual(old, st) {
		return nil
	}
	d.Status = st
	return errors.Wrapf(n.env.kube.Status().Update(ctx, d), "cannot update the status of Deployment %s", d.Name)
}

// condition returns a Deployment condition, keeping its transition time
// when its status did not change.
func condition(old []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	now := metav1.Now()
	c := appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
	for _, o := range old {
		if o.Type == t && o.Status == s {
			c.LastTransitionTime = o.LastTransitionTime
			if o.Reason == reason && o.Message == msg {
				c.LastUpdateTime = o.LastUpdateTime
			}
		}
	}
	return c
}

func statusEqual(a, b appsv1.DeploymentStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Replicas != b.Replicas || a.ReadyReplicas != b.ReadyReplicas ||
		a.AvailableReplicas != b.AvailableReplicas || a.UnavailableReplicas != b.UnavailableReplicas || a.UpdatedReplicas != b.UpdatedReplicas {
		return false
	}
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

func templateHash(t corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", errors.Wrap(err, "cannot hash a pod template")
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// syncServices gives every Service in the namespace a loopback IP with a
// listener per port, and drops those of deleted Services.
func (n *node) syncServices(ctx context.Context) error {
	sl := &corev1.ServiceList{}
	if err := n.env.kube.List(ctx, sl, client.InNamespace(n.env.namespace)); err != nil {
		return errors.Wrap(err, "cannot list Services")
	}
	seen := map[string]bool{}
	changed := false
	var errs []error
	for i := range sl.Items {
		s := &sl.Items[i]
		seen[s.Name] = true
		n.mu.Lock()
		cur, ok := n.services[s.Name]
		n.mu.Unlock()
		if ok && portsEqual(cur.ports, s.Spec.Ports) && (cur.ip == s.Spec.ClusterIP || !loopback(s.Spec.ClusterIP)) {
			n.mu.Lock()
			cur.selector = s.Spec.Selector
			n.mu.Unlock()
			continue
		}
		if ok {
			cur.close()
		}
		svc, err := n.serve(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n.mu.Lock()
		n.services[s.Name] = svc
		n.mu.Unlock()
		changed = true
		n.env.log.Info("Service has a loopback IP", "service", s.Name, "ip", svc.ip)
	}
	n.mu.Lock()
	for name, s := range n.services {
		if !seen[name] {
			s.close()
			delete(n.services, name)
			changed = true
		}
	}
	n.mu.Unlock()
	if changed {
		errs = append(errs, n.writeHosts())
	}
	return errors.Join(errs...)
}

// loopback reports whether ip is a loopback IP address.
func loopback(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && p.IsLoopback()
}

// serve listens for each of s's ports on s's ClusterIP when that is a
// loopback IP (see ServiceCIDR), as kube-apiserver expects, or else on a
// fresh loopback IP.
func (n *node) serve(s *corev1.Service) (*service, error) {
	var last error
	for i := range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254)) //nolint:gosec // Not security relevant.
		if i == 0 && loopback(s.Spec.ClusterIP) {
			ip = s.Spec.ClusterIP
		}
		svc := &service{name: s.Name, ip: ip, selector: s.Spec.Selector, ports: s.Spec.Ports}
		ok := true
		for _, sp := range s.Spec.Ports {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(sp.Port))))
			if err != nil {
				last = err
				ok = false
				break
			}
			svc.listeners = append(svc.listeners, l)
			go forward(l, func(ctx context.Context) (net.Conn, error) { return n.dialService(ctx, svc, sp) })
		}
		if ok {
			return svc, nil
		}
		svc.close()
	}
	return nil, errors.Wrapf(last, "cannot find a free loopback IP for Service %s", s.Name)
}

// dialService connects to the target port of a ready pod or a host endpoint
// the Service selects, trying each in turn.
func (n *node) dialService(ctx context.Context, svc *service, sp corev1.ServicePort) (net.Conn, error) {
	var targets []func(context.Context) (net.Conn, error)
	n.mu.Lock()
	sel := labels.SelectorFromSet(svc.selector)
	for _, d := range n.deploys {
		for _, p := range d.pods {
			if ok, _ := p.status(); ok && len(svc.selector) > 0 && sel.Matches(labels.Set(p.labels)) {
				targets = append(targets, func(ctx context.Context) (net.Conn, error) {
					port, err := containerPort(p.spec.Containers[0], sp.TargetPort)
					if err != nil {
						return nil, err
					}
					return p.dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				})
			}
		}
	}
	for _, e := range n.hostEndpoints {
		if len(svc.selector) > 0 && sel.Matches(labels.Set(e.labels)) {
			targets = append(targets, func(ctx context.Context) (net.Conn, error) {
				port, err := containerPort(corev1.Container{Name: e.name, Ports: e.ports}, sp.TargetPort)
				if err != nil {
					return nil, err
				}
				addr, ok := e.addrs[port]
				if !ok {
					return nil, errors.Errorf("%s serves no port %d", e.name, port)
				}
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			})
		}
	}
	n.mu.Unlock()
	rand.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	last := errors.Errorf("Service %s has no ready endpoints", svc.name)
	for _, dial := range targets {
		c, err := dial(ctx)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func portsEqual(a, b []corev1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Port != b[i].Port || a[i].TargetPort != b[i].TargetPort {
			return false
		}
	}
	return true
}

func (s *service) close() {
	for _, l := range s.listeners {
		_ = l.Close()
	}
}

// writeHosts rewrites the hosts file in place (the same inode: it is bind
// mounted over core's /etc/hosts).
func (n *node) writeHosts() error {
	n.mu.Lock()
	lines := []string{"127.0.0.1\tlocalhost", "::1\tlocalhost"}
	for _, s := range n.services {
		ns := n.env.namespace
		lines = append(lines, fmt.Sprintf("%s\t%s.%s.svc.cluster.local %s.%s.svc %s.%s", s.ip, s.name, ns, s.name, ns, s.name, ns))
	}
	n.mu.Unlock()
	sort.Strings(lines[2:])
	f, err := os.OpenFile(n.hosts, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644) //nolint:gosec // A hosts file is world-readable.
	if err != nil {
		return errors.Wrap(err, "cannot write the cluster hosts file")
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return errors.Wrap(err, "cannot write the cluster hosts file")
}

// pods returns the pods of Deployments whose pod template has the label
// key=value, oldest Deployment first.
func (n *node) podsLabelled(key, value string) []*pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := make([]string, 0, len(n.deploys))
	for name := range n.deploys {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*pod
	for _, name := range names {
		for _, p := range n.deploys[name].pods {
			if p.labels[key] == value {
				out = append(out, p)
			}
		}
	}
	return out
}

// hold keeps the Deployments whose pod template has the label "key=value"
// at zero pods until it is released, as if no node could run them.
func (n *node) hold(label string, on bool) {
	n.mu.Lock()
	if on {
		n.held[label] = true
	} else {
		delete(n.held, label)
	}
	n.mu.Unlock()
	n.poke()
}

// heldLocked reports whether a pod template's labels are held.
func (n *node) heldLocked(l map[string]string) bool {
	for k, v := range l {
		if n.held[k+"="+v] {
			return true
		}
	}
	return false
}

// describe lists every Deployment's pods, for diagnostics.
func (n *node) describe() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for name, d := range n.deploys {
		fmt.Fprintf(&b, "Deployment %s:\n", name)
		for _, p := range d.pods {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	for name, s := range n.services {
		fmt.Fprintf(&b, "Service %s: %s\n", name, s.ip)
	}
	for _, e := range n.hostEndpoints {
		fmt.Fprintf(&b, "Host endpoint %s: labels %v, ports %v\n", e.name, e.labels, e.addrs)
	}
	return b.String()
}
