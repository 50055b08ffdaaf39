//go:build linux

package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/audit"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/node"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/registry"
)

// Tools are the cluster's binaries.
type Tools struct {
	// Node is what the node runs.
	Node node.Tools
	// Assets is the directory of kube-apiserver and etcd
	// ($KUBEBUILDER_ASSETS).
	Assets string
	// ControllerManager, Scheduler, Proxy and CoreDNS are
	// kube-controller-manager, kube-scheduler, kube-proxy (with nft next
	// to it) and coredns.
	ControllerManager, Scheduler, Proxy, CoreDNS string
	// Helm is helm, for InstallCrossplane.
	Helm string
}

// ToolsFromEnv returns the binaries `eval "$(bash hack/tools.sh env)"`
// names, checking each exists; node.ErrNoTools when one is not built.
func ToolsFromEnv() (Tools, error) {
	n, err := node.ToolsFromEnv()
	t := Tools{
		Node:              n,
		Assets:            os.Getenv(kube.AssetsEnv),
		ControllerManager: os.Getenv("KUBE_CONTROLLER_MANAGER_BIN"),
		Scheduler:         os.Getenv("KUBE_SCHEDULER_BIN"),
		Proxy:             os.Getenv("KUBE_PROXY_BIN"),
		CoreDNS:           os.Getenv("COREDNS_BIN"),
		Helm:              os.Getenv("HELM_BIN"),
	}
	if err != nil {
		return t, err
	}
	for _, p := range []string{t.ControllerManager, t.Scheduler, t.Proxy, t.CoreDNS, t.Helm, filepath.Join(filepath.Dir(t.Proxy), "nft")} {
		if p == "" || p == "nft" {
			return t, node.ErrNoTools
		}
		if _, err := os.Stat(p); err != nil {
			return t, errors.Wrapf(err, "%v", node.ErrNoTools)
		}
	}
	if t.Assets == "" {
		return t, kube.ErrNoAssets
	}
	return t, nil
}

// Options say how to run the cluster.
type Options struct {
	// Tools are the binaries; required.
	Tools Tools
	// Dir holds everything the cluster writes; required, and short (unix
	// socket paths are limited to 107 bytes).
	Dir string
	// Bridge is the node's bridge; default "wcluster0".
	Bridge string
	// PodCIDR is the pods' range; its first address is the node's, where
	// kube-apiserver and the registry listen. Default 10.213.0.0/24.
	PodCIDR string
	// ServiceCIDR is the Services' range, routed to the bridge; the first
	// address is the `kubernetes` Service's, the tenth CoreDNS's. Default
	// 10.214.0.0/24.
	ServiceCIDR string
	// Nodes is how many nodes run (default 1). Each further node is a
	// kubelet with its own containerd, directory, cgroup root, bridge
	// (Bridge-<n>) and pod range (the /24 after the previous node's), on
	// this machine: a cluster to lose a node of (StopNode).
	Nodes int
	// NodeLossGrace, when set, is how long a node may stop reporting
	// before it is NotReady (kube-controller-manager's
	// --node-monitor-grace-period) and how long its pods then stay bound
	// to it before they are evicted (kube-apiserver's default toleration
	// of the not-ready and unreachable taints). Kubernetes' defaults are
	// 50 s and 300 s.
	NodeLossGrace time.Duration
	// Log receives progress; default discards.
	Log *slog.Logger
}

// A Cluster is a running one-node cluster. Stop tears it down.
type Cluster struct {
	// Kube is kube-apiserver and etcd, with an admin client.
	Kube *kube.Env
	// Node is the first node, Nodes every node (Options.Nodes).
	Node  *node.Node
	Nodes []*node.Node
	// Registry is the private registry on the node's address.
	Registry *registry.Registry
	// Kubeconfig is an admin kubeconfig (for kubectl and helm).
	Kubeconfig string
	// Log is kube-apiserver's audit log of every ServiceAccount's
	// requests: what the packages asked for and what RBAC refused them.
	*audit.Log

	opts   Options
	log    *slog.Logger
	nodeIP string
	dnsIP  string
	procs  []*proc.Process
	// apiLog is etcd's and kube-apiserver's output, also after a restart.
	apiLog *os.File
	lock   *node.MachineLock
	proxy  *proc.Process
	tokens tokens
	// stopArchive ends archiveLogs.
	stopArchive context.CancelFunc
	stopOnce    sync.Once
	stopErr     error
	// remote is a cluster reached by Connect: no node of this machine.
	remote bool
}

// Start starts the cluster and waits until the node is Ready and CoreDNS
// serves. On error it tears down what it started; otherwise the caller
// must call Stop.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := node.Check(); err != nil {
		return nil, err
	}
	if o.Dir == "" || o.Tools.Node.Kubelet == "" {
		return nil, errors.New("cluster options need Dir and Tools")
	}
	if o.Bridge == "" {
		o.Bridge = "wcluster0"
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.213.0.0/24"
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.214.0.0/24"
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 1 || o.Nodes > maxNodes {
		return nil, errors.Errorf("a cluster here runs 1 to %d nodes, not %d", maxNodes, o.Nodes)
	}
	if _, err := nodeCIDR(o.PodCIDR, o.Nodes-1); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	_, svc, err := net.ParseCIDR(o.ServiceCIDR)
	if err != nil || svc.IP.To4() == nil {
		return nil, errors.Errorf("service CIDR %q is not an IPv4 range", o.ServiceCIDR)
	}
	dns := make(net.IP, 4)
	copy(dns, svc.IP.To4())
	dns[3] += 10
	c := &Cluster{
		opts: o, log: o.Log, dnsIP: dns.String(),
		Kubeconfig: filepath.Join(o.Dir, "kubeconfig"),
		Log:        &audit.Log{Path: filepath.Join(o.Dir, "logs", "kube-apiserver-audit.log")},
	}
	lock, prev, err := node.LockMachine(ctx, func(holder string) {
		o.Log.Info("Waiting for another node on this machine to end", "holder", holder)
	})
	if err != nil {
		return nil, err
	}
	c.lock = lock
	if prev != nil {
		if err := c.reclaim(*prev); err != nil { //nolint:contextcheck // a dead run's leftovers are cleaned up whole, even once ctx ends
			lock.Unlock() // the record stays for the next try
			return nil, err
		}
	}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop()) //nolint:contextcheck // teardown runs to the end even when ctx is what failed the start
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	o := c.opts
	for _, d := range []string{o.Dir, c.path("logs"), c.path("images")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return errors.Wrap(err, "cannot create the cluster's directories")
		}
	}
	if err := c.lock.Record(node.RunRecord{PID: os.Getpid(), Dir: o.Dir, Bridge: o.Bridge}); err != nil {
		return err
	}
	t := time.Now()
	ip, err := node.CreateBridge(o.Bridge, o.PodCIDR)
	if err != nil {
		return err
	}
	c.nodeIP = ip
	// Traffic to Services goes to the bridge before kube-proxy rewrites
	// it, never toward the machine's default route.
	if err := run(ctx, "ip", "route", "add", o.ServiceCIDR, "dev", o.Bridge, "src", ip); err != nil {
		return err
	}
	if c.Registry, err = registry.Start(net.JoinHostPort(ip, "0"), c.path("logs", "registry.log"), PublicRepositories...); err != nil {
		return err
	}

	// Open until Stop: StartAPIServer hands it to the next kube-apiserver.
	apiLog, err := os.Create(c.path("logs", "kube-apiserver.log"))
	if err != nil {
		return errors.Wrap(err, "cannot create kube-apiserver's log")
	}
	c.apiLog = apiLog
	policy := c.path("audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(audit.Policy()), 0o600); err != nil {
		return errors.Wrap(err, "cannot write kube-apiserver's audit policy")
	}
	if c.Kube, err = kube.Start(kube.Options{
		Assets:        o.Tools.Assets,
		EtcdDataDir:   c.path("etcd"),
		CertDir:       c.path("apiserver"),
		Kubeconfig:    c.Kubeconfig,
		Address:       ip,
		ServiceCIDR:   o.ServiceCIDR,
		Pods:          true,
		Scheme:        kube.CrossplaneScheme(),
		EtcdLog:       apiLog,
		APIServerLog:  apiLog,
		AuditPolicy:   policy,
		AuditLog:      c.Path,
		APIServerArgs: tolerations(o.NodeLossGrace),
	}); err != nil {
		return err
	}
	c.log.Info("kube-apiserver ready", "address", c.Kube.Config.Host, "took", since(t))

	if err := c.startControllers(); err != nil {
		return err
	}
	pause, err := node.BuildPauseImage(ctx, c.path("images"))
	if err != nil {
		return err
	}
	first := c.nodeOptions(pause)
	first.Dir, first.Bridge, first.PodCIDR, first.BridgeCreated = c.path("node"), o.Bridge, o.PodCIDR, true
	if c.Node, err = node.Start(ctx, first); err != nil {
		return err
	}
	c.Nodes = []*node.Node{c.Node}
	if err := c.record(); err != nil {
		return err
	}
	for i := 2; i <= o.Nodes; i++ {
		if err := c.startNode(ctx, i, pause); err != nil {
			return err
		}
	}
	archive, stopArchive := context.WithCancel(context.Background())
	c.stopArchive = stopArchive
	go c.archiveLogs(archive) //nolint:contextcheck // the archive runs until Stop, past Start's ctx
	if err := c.startProxy(); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(ctx, n); err != nil {
			return err
		}
		c.log.Info("node Ready", "node", n.Name(), "took", since(t))
	}
	if err := c.startCoreDNS(ctx); err != nil {
		return err
	}
	c.log.Info("CoreDNS ready", "service", c.dnsIP, "took", since(t))
	return nil
}

// NodeIP is the node's address, where kube-apiserver and the registry
// listen and pods reach the host.
func (c *Cluster) NodeIP() string { return c.nodeIP }

// Client is an admin client.
func (c *Cluster) Client() client.Client { return c.Kube.Client }

// RESTConfig is a copy of the admin client's configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.Kube.Config) }

// apiStartGrace is how long after kube-apiserver serves again its RBAC
// authorizer may still refuse what the roles allow.
const apiStartGrace = 5 * time.Second

// StopAPIServer stops kube-apiserver (etcd keeps running); pods keep
// running and lose the API until StartAPIServer.
func (c *Cluster) StopAPIServer() error {
	if c.remote {
		return errors.Wrap(ErrNotLocal, "cannot stop kube-apiserver")
	}
	t := time.Now()
	if err := c.Kube.StopAPIServer(); err != nil {
		return err
	}
	c.log.Info("kube-apiserver stopped", "took", since(t))
	return nil
}

// StartAPIServer starts kube-apiserver again on the same address, with
// the same certificates and signing keys, and returns once it serves.
// What it refuses in its first seconds counts as Starting (audit.Forbidden).
func (c *Cluster) StartAPIServer() error {
	if c.remote {
		return errors.Wrap(ErrNotLocal, "cannot start kube-apiserver")
	}
	t := time.Now()
	err := c.Kube.StartAPIServer()
	c.APIServerStarting(t, time.Now().Add(apiStartGrace))
	if err != nil {
		return errors.Wrap(err, "cannot start kube-apiserver again")
	}
	c.log.Info("kube-apiserver serves again", "took", since(t))
	return nil
}

// Stop tears the cluster down, also after a failed or partial start: the
// node (every pod), kube-proxy's rules, the control plane's processes,
// kube-apiserver and etcd, the registry and the bridge. It is safe to call
// more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	if c.remote {
		// Not ours to tear down.
		return nil
	}
	var errs []error
	if c.stopArchive != nil {
		c.stopArchive()
		c.linkLogs()
	}
	// Further nodes first: each removes from the machine's shared paths
	// only what was added after it started.
	for i := len(c.Nodes) - 1; i > 0; i-- {
		errs = append(errs, c.Nodes[i].Stop())
	}
	if c.Node != nil {
		errs = append(errs, c.Node.Stop())
	}
	if c.proxy != nil {
		errs = append(errs, c.proxy.Stop(), c.cleanupProxy())
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].Stop())
	}
	if c.Kube != nil {
		errs = append(errs, c.Kube.Stop())
	}
	if c.apiLog != nil {
		errs = append(errs, c.apiLog.Close())
	}
	if c.Registry != nil {
		errs = append(errs, c.Registry.Close())
	}
	if c.nodeIP != "" {
		errs = append(errs, node.DeleteBridge(c.opts.Bridge))
	}
	if err := errors.Join(errs...); err != nil {
		// The record stays: the next cluster tears down what is left.
		return errors.Wrap(err, "cannot tear the cluster down")
	}
	c.lock.Release()
	return nil
}

// ReclaimKilled tears down what a node or cluster whose process was killed
// left on this machine, as Start does before it starts, and returns the
// killed run's record (nil when no run was killed). A caller that empties a
// killed run's directory before starting a cluster in it calls this first:
// the killed run's containers still hold files there.
func ReclaimKilled(ctx context.Context, o Options) (*node.RunRecord, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	lock, prev, err := node.LockMachine(ctx, func(holder string) {
		o.Log.Info("Waiting for another node on this machine to end", "holder", holder)
	})
	if err != nil {
		return nil, err
	}
	if prev == nil {
		lock.Release()
		return nil, nil
	}
	c := &Cluster{opts: o, log: o.Log}
	if err := c.reclaim(*prev); err != nil { //nolint:contextcheck // a dead run's leftovers are cleaned up whole, even once ctx ends
		lock.Unlock() // the record stays for the next try
		return prev, err
	}
	lock.Release()
	return prev, nil
}

// LeftoversOf lists what the killed run r still has on the machine, as
// Leftovers does for a cluster that stopped: after ReclaimKilled, nothing.
func LeftoversOf(o Options, r node.RunRecord) []string {
	c := &Cluster{opts: o}
	return append(node.RunLeftovers(r), c.proxyLeftovers()...)
}

// reclaim tears down what a node or cluster whose process was killed left
// (the lock file's record): every process that names its directory, the
// node's containers, mounts and cgroups, its bridge, and kube-proxy's rules.
func (c *Cluster) reclaim(r node.RunRecord) error {
	done, err := node.ReclaimRun(r)
	if cerr := c.cleanupProxy(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return err
	}
	c.log.Info("Tore down what a killed node left", "pid", r.PID, "dir", r.Dir, "removed", len(done))
	return nil
}

// Leftovers lists what the cluster left on the machine after Stop: the
// node's leftovers, kube-proxy's nftables tables and the bridge.
func (c *Cluster) Leftovers() []string {
	if c.remote {
		return nil
	}
	var out []string
	for i := len(c.Nodes) - 1; i > 0; i-- {
		out = append(out, c.Nodes[i].Leftovers()...)
	}
	if c.Node != nil {
		out = append(out, c.Node.Leftovers()...)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.opts.Bridge)); err == nil {
		out = append(out, "network link "+c.opts.Bridge)
	}
	return append(out, c.proxyLeftovers()...)
}

// proxyLeftovers lists kube-proxy's nftables tables that are still there.
func (c *Cluster) proxyLeftovers() []string {
	var out []string
	for _, fam := range []string{"ip", "ip6"} {
		if err := run(context.Background(), c.nft(), "list", "table", fam, "kube-proxy"); err == nil {
			out = append(out, "nftables table "+fam+" kube-proxy")
		}
	}
	return out
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.opts.Dir}, elem...)...)
}

// CreatePullSecret creates (or updates) the Secret name in namespace, of
// type kubernetes.io/dockerconfigjson, holding the registry's credentials.
func (c *Cluster) CreatePullSecret(ctx context.Context, namespace, name string) error {
	cfg, err := c.Registry.DockerConfigJSON()
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
	err = c.Kube.Client.Create(ctx, s)
	if kerrors.IsAlreadyExists(err) {
		err = c.Kube.Client.Update(ctx, s)
	}
	return errors.Wrapf(err, "cannot write pull Secret %s/%s", namespace, name)
}

// run runs a command, returning its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return errors.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// goarch is the architecture of the images the cluster builds.
var goarch = runtime.GOARCH

func itoa(i int32) string { return fmt.Sprint(i) }

// ContainerCgroup is the directory of the container id (a pod status's
// containerID without its "containerd://") in the cgroup v1 hierarchy of
// controller (such as "memory"), under the node's cgroup root.
func (c *Cluster) ContainerCgroup(controller, id string) (string, error) {
	if c.remote {
		return "", errors.Wrapf(ErrNotLocal, "cannot find container %s's cgroup", id)
	}
	found := ""
	roots := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		root := filepath.Join("/sys/fs/cgroup", controller, n.CgroupRoot())
		roots = append(roots, root)
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil //nolint:nilerr // cgroups come and go while we walk
			}
			if d.Name() == id {
				found = p
				return filepath.SkipAll
			}
			return nil
		})
		if found != "" {
			return found, nil
		}
	}
	return "", errors.Errorf("no %s cgroup for container %s under %s", controller, id, strings.Join(roots, ", "))
}
