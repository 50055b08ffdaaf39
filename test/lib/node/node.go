//go:build linux

package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// Tools are the node's binaries.
type Tools struct {
	// Kubelet is kubelet ($KUBELET_BIN).
	Kubelet string
	// Containerd is containerd ($CONTAINERD_BIN); containerd-shim-runc-v2
	// and ctr are next to it.
	Containerd string
	// Ctr is containerd's CLI (next to Containerd by default).
	Ctr string
	// Runc is runc built with seccomp ($RUNC_BIN).
	Runc string
	// CNIDir holds the CNI plugins bridge, host-local and loopback
	// ($CNI_PLUGINS_DIR).
	CNIDir string
}

// ErrNoTools is returned by ToolsFromEnv when the node's binaries are not
// configured: callers skip.
var ErrNoTools = errors.New("the node's tools are not built: run `bash hack/tools.sh node` and eval \"$(bash hack/tools.sh env)\"")

// ToolsFromEnv returns the binaries `eval "$(bash hack/tools.sh env)"`
// names, checking each exists.
func ToolsFromEnv() (Tools, error) {
	t := Tools{
		Kubelet:    os.Getenv("KUBELET_BIN"),
		Containerd: os.Getenv("CONTAINERD_BIN"),
		Runc:       os.Getenv("RUNC_BIN"),
		CNIDir:     os.Getenv("CNI_PLUGINS_DIR"),
	}
	if t.Kubelet == "" || t.Containerd == "" || t.Runc == "" || t.CNIDir == "" {
		return t, ErrNoTools
	}
	t.Ctr = filepath.Join(filepath.Dir(t.Containerd), "ctr")
	for _, p := range []string{
		t.Kubelet, t.Containerd, t.Ctr, t.Runc,
		filepath.Join(filepath.Dir(t.Containerd), "containerd-shim-runc-v2"),
		filepath.Join(t.CNIDir, "bridge"), filepath.Join(t.CNIDir, "host-local"), filepath.Join(t.CNIDir, "loopback"),
	} {
		if _, err := os.Stat(p); err != nil {
			return t, errors.Wrapf(err, "%v", ErrNoTools)
		}
	}
	return t, nil
}

// Options say how to run the node.
type Options struct {
	// Tools are the binaries; required.
	Tools Tools
	// Dir holds everything the node writes; required, and should be short
	// (unix socket paths are limited to 107 bytes).
	Dir string
	// Kubeconfig is kubelet's kubeconfig; required.
	Kubeconfig string
	// Name is the Node's name; default "widget-node".
	Name string
	// Bridge is the bridge the node creates for its pods; default
	// "wnode0".
	Bridge string
	// PodCIDR is the pods' address range, an IPv4 /24 or larger that no
	// link of the machine uses; its first address is the node's (on the
	// bridge). Default 10.213.0.0/24.
	PodCIDR string
	// BridgeCreated says the caller has created Bridge with CreateBridge
	// (to serve on the node's address before the node starts): Start uses
	// it, and the caller deletes it after Stop.
	BridgeCreated bool
	// ClusterDNS, when set, is the cluster DNS Service's address that
	// kubelet gives pods (domain cluster.local).
	ClusterDNS string
	// ClientCAFile, when set, is the CA kubelet trusts for client
	// certificates: kube-apiserver's for logs, exec and port-forward.
	ClientCAFile string
	// PlainHTTPRegistries are registries (host:port) containerd pulls
	// from over plain HTTP, with the credentials of the pods' pull
	// Secrets.
	PlainHTTPRegistries []string
	// Lock is the machine lock, when the caller holds it (and keeps its
	// record). Unset, Start takes it, tearing down first what a killed
	// node left, and Stop releases it.
	Lock *MachineLock
	// Images are image archives (docker or OCI) imported into containerd
	// before kubelet starts. The sandbox image must be one of them.
	Images []string
	// SandboxImage is the pods' sandbox ("pause") image; default
	// PauseImage.
	SandboxImage string
	// Log receives the node's progress; default discards.
	Log *slog.Logger
}

// A Node is a running containerd and kubelet. Stop tears it down.
type Node struct {
	opts  Options
	tools Tools
	log   *slog.Logger

	id             string
	cgroupRoot     string
	nodeIP         string
	containerdSock string
	sysctls        map[string]string
	links          []string
	ports          []string
	machine        map[string]machinePath
	lock           *MachineLock

	containerd, kubelet *proc.Process

	stopOnce sync.Once
	stopErr  error
}

// MachinePaths are where containerd, kubelet and the CNI library write
// whatever their configuration says, parents before children: the shims'
// sockets, kubelet's device plugin socket, libcni's result cache and
// kubelet's links to container logs. Stop removes what the node added
// there (and each directory it created, once empty).
var MachinePaths = []string{
	"/run/containerd", "/run/containerd/s",
	"/var/lib/kubelet", "/var/lib/kubelet/device-plugins",
	"/var/lib/cni", "/var/lib/cni/results",
	"/var/log/containers",
}

// machinePath is what a machine path held before the node started.
type machinePath struct {
	existed bool
	entries []string
}

// Start starts containerd and kubelet. On error it tears down what it
// started; otherwise the caller must call Stop (in a test: t.Cleanup).
func Start(ctx context.Context, o Options) (*Node, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if o.Dir == "" || o.Kubeconfig == "" || o.Tools.Kubelet == "" {
		return nil, errors.New("node options need Dir, Kubeconfig and Tools")
	}
	if o.Name == "" {
		o.Name = "widget-node"
	}
	if o.Bridge == "" {
		o.Bridge = "wnode0"
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.213.0.0/24"
	}
	if o.SandboxImage == "" {
		o.SandboxImage = PauseImage
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Tools.Ctr == "" {
		o.Tools.Ctr = filepath.Join(filepath.Dir(o.Tools.Containerd), "ctr")
	}
	cidr, gw, err := gateway(o.PodCIDR)
	if err != nil {
		return nil, err
	}
	ones, _ := cidr.Mask.Size()
	var own *MachineLock
	if o.Lock == nil {
		lock, prev, err := LockMachine(ctx, func(holder string) {
			o.Log.Info("Waiting for another node on this machine to end", "holder", holder)
		})
		if err != nil {
			return nil, err
		}
		if prev != nil {
			done, err := ReclaimRun(*prev)
			if err != nil {
				lock.Unlock() // the record stays for the next try
				return nil, err
			}
			o.Log.Info("Tore down what a killed node left", "pid", prev.PID, "dir", prev.Dir, "removed", len(done))
		}
		own = lock
	}

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := &Node{
		opts:           o,
		tools:          o.Tools,
		log:            o.Log,
		id:             hex.EncodeToString(b),
		nodeIP:         gw.String(),
		containerdSock: filepath.Join(o.Dir, "containerd", "containerd.sock"),
		// Recorded before anything runs; Stop restores and compares.
		sysctls: readSysctls(Sysctls),
		links:   links(),
		machine: map[string]machinePath{},
		lock:    own,
	}
	for _, p := range MachinePaths {
		_, err := os.Stat(p)
		n.machine[p] = machinePath{existed: err == nil, entries: entries(p)}
	}
	n.cgroupRoot = "/widget-node-" + n.id
	if own != nil {
		if err := own.Record(RunRecord{PID: os.Getpid(), Dir: o.Dir, CgroupRoot: n.cgroupRoot, Bridge: o.Bridge}); err != nil {
			return nil, errors.Join(err, n.Stop()) //nolint:contextcheck // teardown runs to the end, whatever ctx
		}
	}
	if err := n.start(ctx, cidr.String(), fmt.Sprintf("%s/%d", n.nodeIP, ones)); err != nil {
		return nil, errors.Join(err, n.Stop()) //nolint:contextcheck // teardown runs to the end even when ctx is what failed the start
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, cidr, nodeAddr string) error {
	o := n.opts
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return errors.Wrap(err, "cannot create the node's directory")
	}
	logs := filepath.Join(o.Dir, "logs")
	if err := os.MkdirAll(logs, 0o750); err != nil {
		return errors.Wrap(err, "cannot create the node's log directory")
	}
	if !o.BridgeCreated {
		if err := createBridge(o.Bridge, nodeAddr); err != nil {
			return err
		}
	}
	if err := createCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}

	// containerd, with the CNI config the CRI plugin loads.
	cdir := filepath.Join(o.Dir, "containerd")
	cni, err := cniConfig(o.Bridge, cidr, n.nodeIP, filepath.Join(o.Dir, "cni", "ipam"))
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.Dir, "cni", "net.d", "10-widget-node.conflist"), cni); err != nil {
		return err
	}
	for _, r := range o.PlainHTTPRegistries {
		if err := writeFile(filepath.Join(cdir, "certs.d", r, "hosts.toml"), plainHTTPHost(r)); err != nil {
			return err
		}
	}
	cfg := filepath.Join(cdir, "config.toml")
	if err := writeFile(cfg, []byte(containerdConfig(cdir, o.Tools.Runc, o.Tools.CNIDir, filepath.Join(o.Dir, "cni", "net.d"), o.SandboxImage))); err != nil {
		return err
	}
	// The shim is found next to containerd; runc by its configured path.
	env := append(os.Environ(), "PATH="+filepath.Dir(o.Tools.Containerd)+":"+os.Getenv("PATH"))
	n.containerd = proc.New("containerd", proc.Command{Path: o.Tools.Containerd, Args: []string{"--config", cfg}, Dir: cdir},
		env, filepath.Join(logs, "containerd.log"), n.log)
	if err := n.containerd.Start(); err != nil {
		return err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	for _, img := range o.Images {
		if err := n.importImage(ctx, img); err != nil {
			return err
		}
	}
	n.log.Info("containerd ready", "socket", n.containerdSock, "images", len(o.Images))

	// kubelet.
	kdir := filepath.Join(o.Dir, "kubelet")
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	hport, err := proc.FreePort()
	if err != nil {
		return err
	}
	paths := kubeletPaths{
		Root:          filepath.Join(kdir, "root"),
		PodLogs:       filepath.Join(kdir, "pods"),
		VolumePlugins: filepath.Join(kdir, "volume-plugins"),
	}
	kc, err := kubeletConfig(paths, "unix://"+n.containerdSock, n.cgroupRoot, n.nodeIP, o.ClusterDNS, o.ClientCAFile, port, hport)
	if err != nil {
		return err
	}
	kcfg := filepath.Join(kdir, "config.yaml")
	if err := writeFile(kcfg, kc); err != nil {
		return err
	}
	n.kubelet = proc.New("kubelet", proc.Command{
		Path: o.Tools.Kubelet,
		Args: []string{
			"--config=" + kcfg,
			"--kubeconfig=" + o.Kubeconfig,
			"--root-dir=" + paths.Root,
			"--cert-dir=" + filepath.Join(kdir, "pki"),
			"--hostname-override=" + o.Name,
			"--node-ip=" + n.nodeIP,
			"--v=1",
		},
		Dir: kdir,
	}, os.Environ(), filepath.Join(logs, "kubelet.log"), n.log)
	if err := n.kubelet.Start(); err != nil {
		return err
	}
	n.log.Info("kubelet started", "node", o.Name, "ip", n.nodeIP, "cgroupRoot", n.cgroupRoot, "log", n.kubelet.LogPath())
	return nil
}

// Name is the Node's name.
func (n *Node) Name() string { return n.opts.Name }

// Dir is the node's directory.
func (n *Node) Dir() string { return n.opts.Dir }

// Bridge is the node's bridge.
func (n *Node) Bridge() string { return n.opts.Bridge }

// IP is the node's address: the gateway of the pod range, on the bridge.
func (n *Node) IP() string { return n.nodeIP }

// CgroupRoot is the cgroup (in every v1 hierarchy) under which kubelet
// puts the pods' cgroups.
func (n *Node) CgroupRoot() string { return n.cgroupRoot }

// KubeletRootDir is kubelet's root directory: the pods' volumes are under
// pods/<uid>/volumes.
func (n *Node) KubeletRootDir() string { return filepath.Join(n.opts.Dir, "kubelet", "root") }

// LogsDir holds the node's own logs: kubelet's and containerd's.
func (n *Node) LogsDir() string { return filepath.Join(n.opts.Dir, "logs") }

// KubeletLog is kubelet's log file.
func (n *Node) KubeletLog() string { return filepath.Join(n.opts.Dir, "logs", "kubelet.log") }

// ContainerdLog is containerd's log file.
func (n *Node) ContainerdLog() string { return filepath.Join(n.opts.Dir, "logs", "containerd.log") }

// PodLogsDir is where kubelet keeps the containers' logs:
// <namespace>_<pod>_<uid>/<container>/<restart>.log.
func (n *Node) PodLogsDir() string { return filepath.Join(n.opts.Dir, "kubelet", "pods") }

// RestartKubelet stops kubelet (containers keep running) and starts it
// again. The new kubelet has no ServiceAccount token cached: it requests a
// new one for every projected volume and writes it into the running pods,
// as it does when it rotates them at 80 % of their lifetime (ten minutes
// at least).
func (n *Node) RestartKubelet() error {
	if err := n.kubelet.Restart(); err != nil {
		return errors.Wrap(err, "cannot restart kubelet")
	}
	return nil
}

// KubeletExited is closed when kubelet exits.
func (n *Node) KubeletExited() <-chan struct{} { return n.kubelet.Exited() }

// Stop tears the node down, also after a failed or partial start: kubelet,
// then every pod sandbox and container through containerd, containerd,
// whatever is left in the node's cgroups or mentions its directory (shims,
// containers), mounts under its directory, the bridge, the cgroups, what
// it added to MachinePaths, and the sysctls kubelet and CNI changed. It is safe
// to call more than once; later calls return the first call's result.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop() })
	return n.stopErr
}

func (n *Node) stop() error {
	var errs []error
	// The pods' host-side veths, to check they go with their sandboxes.
	n.ports = bridgePorts(n.opts.Bridge)
	if n.kubelet != nil {
		errs = append(errs, n.kubelet.Stop())
	}
	if n.containerd != nil && n.containerd.Running() {
		n.removeContainers()
		errs = append(errs, n.containerd.Stop())
	}
	// Shims outlive containerd by design, and containers outlive a killed
	// shim: kill both, by cgroup and by the node's directory in their
	// arguments (a shim's -address names containerd's socket).
	for range 3 {
		for _, pid := range cgroupPIDs(n.cgroupRoot) {
			killPID(pid)
		}
		killMentioning(n.opts.Dir)
	}
	errs = append(errs, unmountUnder(n.opts.Dir))
	if linkExists(n.opts.Bridge) && !contains(n.links, n.opts.Bridge) {
		errs = append(errs, ip("link", "del", n.opts.Bridge))
	}
	errs = append(errs, removeCgroupRoot(n.cgroupRoot))
	errs = append(errs, n.cleanMachinePaths())
	restored, err := restoreSysctls(n.sysctls)
	if len(restored) > 0 {
		n.log.Info("Restored the sysctls kubelet and the bridge plugin changed", "sysctls", restored)
	}
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		// The record stays: the next node tears down what is left.
		return errors.Wrap(err, "cannot tear the node down")
	}
	if n.lock != nil {
		n.lock.Release()
	}
	return nil
}

// cleanMachinePaths removes, in MachinePaths, what the node added: new
// sockets (the node's processes are gone by now), new symbolic links into
// the node's directory (or any in a directory the node created), new files
// named after one of its pod sandboxes (libcni's cached results, left when
// a sandbox was killed rather than torn down), and each directory the node
// created once nothing else is left in it. Anything else is left for
// Leftovers to report.
func (n *Node) cleanMachinePaths() error {
	sandboxes := entries(filepath.Join(n.opts.Dir, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes"))
	var errs []error
	for i := len(MachinePaths) - 1; i >= 0; i-- {
		p := MachinePaths[i]
		before := n.machine[p]
		for _, e := range added(before.entries, entries(p)) {
			f := filepath.Join(p, e)
			fi, err := os.Lstat(f)
			if err != nil {
				continue
			}
			ours := fi.Mode()&os.ModeSocket != 0
			if t, err := os.Readlink(f); err == nil {
				ours = !before.existed || strings.HasPrefix(t, n.opts.Dir+"/")
			}
			for _, id := range sandboxes {
				ours = ours || (fi.Mode().IsRegular() && strings.Contains(e, id))
			}
			if ours {
				errs = append(errs, os.Remove(f))
			}
		}
		if !before.existed && len(entries(p)) == 0 {
			_ = os.Remove(p) // not created yet, or gone already: nothing to do
		}
	}
	return errors.Join(errs...)
}

// removeContainers stops and removes every pod sandbox and container
// through containerd's API while it still runs, so that the shims unmount
// the rootfs and CNI releases addresses. Errors are ignored: what is left
// is killed and unmounted after containerd has stopped.
func (n *Node) removeContainers() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	out, err := n.ctr(ctx, "tasks", "list", "--quiet")
	if err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
			_, _ = n.ctr(ctx, "tasks", "delete", "--force", id)
		}
	}
	if out, err := n.ctr(ctx, "containers", "list", "--quiet"); err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.ctr(ctx, "containers", "delete", id)
		}
	}
}

// Leftovers lists what the node left on the machine after Stop: processes
// that mention its directory or sit in its cgroups, mounts under its
// directory, its bridge and any other new link, its cgroups, what it added
// to MachinePaths, and sysctls that differ from before.
// Empty means the machine is as Start found it.
func (n *Node) Leftovers() []string {
	out := make([]string, 0, 4)
	for _, p := range processesMentioning(n.opts.Dir) {
		out = append(out, "process "+p)
	}
	for _, pid := range cgroupPIDs(n.cgroupRoot) {
		out = append(out, "process "+strconv.Itoa(pid)+" in cgroup "+n.cgroupRoot)
	}
	for _, m := range mountsUnder(n.opts.Dir) {
		out = append(out, "mount "+m)
	}
	// Only the node's own links: other software may add links meanwhile.
	if !n.opts.BridgeCreated && !contains(n.links, n.opts.Bridge) && linkExists(n.opts.Bridge) {
		out = append(out, "network link "+n.opts.Bridge)
	}
	for _, l := range n.ports {
		if linkExists(l) {
			out = append(out, "network link "+l+" (a pod's veth)")
		}
	}
	for _, d := range cgroupDirs(n.cgroupRoot) {
		out = append(out, "cgroup "+d)
	}
	for _, p := range MachinePaths {
		before := n.machine[p]
		if _, err := os.Stat(p); err == nil && !before.existed {
			out = append(out, p+" (created by the node)")
			continue
		}
		for _, e := range added(before.entries, entries(p)) {
			out = append(out, filepath.Join(p, e))
		}
	}
	out = append(out, changedSysctls(n.sysctls)...)
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// RunLeftovers lists what the run of r left on the machine: processes that
// mention its directory or sit in its cgroups, mounts under its directory,
// its cgroups and its bridge. After ReclaimRun it is empty.
func RunLeftovers(r RunRecord) []string {
	out := make([]string, 0, 4)
	for _, p := range processesMentioning(r.Dir) {
		out = append(out, "process "+p)
	}
	for _, pid := range cgroupPIDs(r.CgroupRoot) {
		out = append(out, "process "+strconv.Itoa(pid)+" in cgroup "+r.CgroupRoot)
	}
	for _, m := range mountsUnder(r.Dir) {
		out = append(out, "mount "+m)
	}
	for _, d := range cgroupDirs(r.CgroupRoot) {
		out = append(out, "cgroup "+d)
	}
	if r.Bridge != "" && linkExists(r.Bridge) {
		out = append(out, "network link "+r.Bridge)
	}
	for _, n := range r.Nodes {
		out = append(out, RunLeftovers(n)...)
	}
	return out
}

// ReclaimRun tears down what the run of r left (Reclaim) and its bridge.
func ReclaimRun(r RunRecord) ([]string, error) {
	var done []string
	errs := make([]error, 0, len(r.Nodes)+2)
	// Further nodes first, as Stop tears a cluster down.
	for _, n := range r.Nodes {
		d, err := ReclaimRun(n)
		done, errs = append(done, d...), append(errs, err)
	}
	d, err := Reclaim(r.Dir, r.CgroupRoot)
	done, errs = append(done, d...), append(errs, err)
	if r.Bridge != "" && linkExists(r.Bridge) {
		done = append(done, "network link "+r.Bridge)
		errs = append(errs, DeleteBridge(r.Bridge))
	}
	return done, errors.Wrapf(errors.Join(errs...), "cannot tear down what a killed node (pid %d, %s) left", r.PID, r.Dir)
}

// Reclaim tears down what a node that was killed before its Stop left on
// the machine, given its directory and cgroup root: its processes
// (containerd, kubelet, shims, containers), the mounts under its
// directory, its cgroups, and the container log links into its directory.
// The sysctls it changed cannot be told from the machine's own and stay.
// It returns what it removed.
func Reclaim(dir, cgroupRoot string) ([]string, error) {
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) == "/" {
		return nil, errors.Errorf("cannot reclaim node directory %q: not an absolute path below /", dir)
	}
	done := make([]string, 0, 8)
	for range 3 {
		for _, pid := range cgroupPIDs(cgroupRoot) {
			done = append(done, "process "+strconv.Itoa(pid))
			killPID(pid)
		}
		for _, p := range processesMentioning(dir) {
			done = append(done, "process "+p)
		}
		killMentioning(dir)
	}
	for _, m := range mountsUnder(dir) {
		done = append(done, "mount "+m)
	}
	errs := []error{unmountUnder(dir)}
	if cgroupRoot != "" && len(cgroupDirs(cgroupRoot)) > 0 {
		done = append(done, "cgroup "+cgroupRoot)
		errs = append(errs, removeCgroupRoot(cgroupRoot))
	}
	for _, e := range entries("/var/log/containers") {
		f := filepath.Join("/var/log/containers", e)
		if t, err := os.Readlink(f); err == nil && strings.HasPrefix(t, dir+"/") {
			done = append(done, f)
			errs = append(errs, os.Remove(f))
		}
	}
	// The killed shims' sockets: no one listens on them any more.
	for _, e := range entries("/run/containerd/s") {
		f := filepath.Join("/run/containerd/s", e)
		if fi, err := os.Lstat(f); err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		conn, err := net.DialTimeout("unix", f, time.Second) //nolint:noctx // a 1s probe of a local socket, in teardown, which has no ctx
		if err == nil {
			_ = conn.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			done = append(done, f)
			errs = append(errs, os.Remove(f))
		}
	}
	return done, errors.Join(errs...)
}
