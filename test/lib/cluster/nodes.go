//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/node"
)

// maxNodes bounds Options.Nodes: each node is a kubelet and a containerd
// on this machine's two cores.
const maxNodes = 4

// nodeCIDR is the pod range of the node after i others: the i-th /24 after
// the first node's.
func nodeCIDR(first string, i int) (string, error) {
	ip, n, err := net.ParseCIDR(first)
	if err != nil || ip.To4() == nil {
		return "", errors.Errorf("pod CIDR %q is not an IPv4 range", first)
	}
	if ones, _ := n.Mask.Size(); i > 0 && ones != 24 {
		return "", errors.Errorf("pod CIDR %q: a cluster of several nodes needs a /24, each further node taking the next", first)
	}
	b := n.IP.To4()
	if int(b[2])+i > 255 {
		return "", errors.Errorf("pod CIDR %q has no room for %d more nodes", first, i)
	}
	next := net.IPv4(b[0], b[1], b[2]+byte(i), b[3])
	ones, _ := n.Mask.Size()
	return next.String() + "/" + strconv.Itoa(ones), nil
}

// nodeMonitorGrace is kube-controller-manager's flags for NodeLossGrace.
func nodeMonitorGrace(d time.Duration) []string {
	if d <= 0 {
		return nil
	}
	return []string{"--node-monitor-grace-period=" + d.String()}
}

// tolerations is kube-apiserver's flags for NodeLossGrace: the tolerations
// of the not-ready and unreachable taints every pod gets.
func tolerations(d time.Duration) map[string]string {
	if d <= 0 {
		return nil
	}
	s := strconv.Itoa(int(d.Round(time.Second).Seconds()))
	return map[string]string{"default-not-ready-toleration-seconds": s, "default-unreachable-toleration-seconds": s}
}

// startNode starts the i-th node (from 2): its own directory (w<i>, which
// no other node's path contains), bridge, pod range and cgroup root, and
// records it in the machine lock before anything of it runs.
func (c *Cluster) startNode(ctx context.Context, i int, pause string) error {
	o := c.opts
	cidr, err := nodeCIDR(o.PodCIDR, i-1)
	if err != nil {
		return err
	}
	no := c.nodeOptions(pause)
	no.Dir, no.Name, no.Bridge, no.PodCIDR = c.path(fmt.Sprintf("w%d", i)), fmt.Sprintf("widget-node-%d", i), fmt.Sprintf("%s-%d", o.Bridge, i), cidr
	n, err := node.Start(ctx, no)
	if err != nil {
		return err
	}
	c.Nodes = append(c.Nodes, n)
	return c.record()
}

// nodeOptions are what every node of the cluster shares: the tools, the
// cluster's kubeconfig, DNS, CA and registry, the sandbox image and the
// machine lock the cluster holds. The caller adds the node's own
// directory, name, bridge and pod range.
func (c *Cluster) nodeOptions(pause string) node.Options {
	return node.Options{
		Tools:               c.opts.Tools.Node,
		Kubeconfig:          c.Kubeconfig,
		ClusterDNS:          c.dnsIP,
		ClientCAFile:        c.path("apiserver", "ca.crt"),
		PlainHTTPRegistries: []string{c.Registry.Host},
		Images:              []string{pause},
		Lock:                c.lock,
		Log:                 c.log,
	}
}

// record writes every node of the cluster into the machine lock's record,
// so that a run killed now is torn down whole by the next.
func (c *Cluster) record() error {
	r := node.RunRecord{PID: os.Getpid(), Dir: c.opts.Dir, CgroupRoot: c.Node.CgroupRoot(), Bridge: c.opts.Bridge}
	for _, n := range c.Nodes[1:] {
		r.Nodes = append(r.Nodes, node.RunRecord{PID: os.Getpid(), Dir: n.Dir(), CgroupRoot: n.CgroupRoot(), Bridge: n.Bridge()})
	}
	return c.lock.Record(r)
}

// StopNode stops the node name as a lost machine would: kubelet and every
// container of it end at once, and nothing tells the API. The Node stays,
// NotReady once kube-controller-manager misses its heartbeats
// (NodeLossGrace), and its pods are evicted after their toleration. Only a
// further node (not the first, whose bridge carries kube-apiserver and the
// registry) can be stopped.
func (c *Cluster) StopNode(name string) error {
	for _, n := range c.Nodes[1:] {
		if n.Name() == name {
			return errors.Wrapf(n.Stop(), "cannot stop node %s", name)
		}
	}
	return errors.Errorf("cannot stop node %s: only a further node of the cluster can be (%d nodes)", name, len(c.Nodes))
}

// NodeOf returns the node a pod runs on, or nil.
func (c *Cluster) NodeOf(p *corev1.Pod) *node.Node {
	for _, n := range c.Nodes {
		if n.Name() == p.Spec.NodeName {
			return n
		}
	}
	return nil
}

// waitNodeReady waits until the Node n reports Ready, failing at once when
// its kubelet exits.
func (c *Cluster) waitNodeReady(ctx context.Context, n *node.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		obj := &corev1.Node{}
		err := c.Kube.Client.Get(ctx, client.ObjectKey{Name: n.Name()}, obj)
		if err == nil {
			for _, cond := range obj.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-n.KubeletExited():
			return errors.Errorf("kubelet of node %s exited; see %s", n.Name(), n.KubeletLog())
		case <-ctx.Done():
			return errors.Errorf("node %s not Ready within 3m (last error: %v); see %s", n.Name(), err, n.KubeletLog())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
