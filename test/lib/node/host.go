//go:build linux

package node

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Check reports what this machine lacks to run a node: root, the cgroup v1
// memory controller, overlayfs, the ip command. nil means it has all of it.
func Check() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (kubelet, containerd and runc need it)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
		missing = append(missing, "the cgroup v1 memory controller at /sys/fs/cgroup/memory")
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(b, []byte("\toverlay\n")) {
		missing = append(missing, "overlayfs (containerd's snapshotter)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "the ip command (Debian package iproute2)")
	}
	if len(missing) > 0 {
		return errors.Errorf("this machine lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// Sysctls are the kernel settings kubelet (vm.*, kernel.*) and the CNI
// bridge plugin (net.ipv4.ip_forward) change on the whole machine. Start
// records them and Stop puts them back.
var Sysctls = []string{
	"vm.overcommit_memory",
	"vm.panic_on_oom",
	"kernel.panic",
	"kernel.panic_on_oops",
	"kernel.keys.root_maxkeys",
	"kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward",
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// readSysctls returns the current value of each of names that exists.
func readSysctls(names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		b, err := os.ReadFile(sysctlPath(n))
		if err != nil {
			continue
		}
		m[n] = strings.TrimSpace(string(b))
	}
	return m
}

// restoreSysctls writes back every value in want that differs now, and
// says which it restored ("name: now -> wanted").
func restoreSysctls(want map[string]string) ([]string, error) {
	var errs []error
	restored := make([]string, 0, len(want))
	now := readSysctls(sortedKeys(want))
	for _, n := range sortedKeys(want) {
		if now[n] == want[n] {
			continue
		}
		if err := os.WriteFile(sysctlPath(n), []byte(want[n]+"\n"), 0o644); err != nil { //nolint:gosec // a sysctl, not a secret
			errs = append(errs, errors.Wrapf(err, "cannot restore %s to %s", n, want[n]))
			continue
		}
		restored = append(restored, fmt.Sprintf("%s: %s -> %s", n, now[n], want[n]))
	}
	return restored, errors.Join(errs...)
}

// changedSysctls describes each of want's sysctls whose value is not
// want's now.
func changedSysctls(want map[string]string) []string {
	var out []string
	now := readSysctls(sortedKeys(want))
	for _, n := range sortedKeys(want) {
		if now[n] != want[n] {
			out = append(out, fmt.Sprintf("sysctl %s is %s, was %s", n, now[n], want[n]))
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// cgroupV1Mounts returns the mount points of the cgroup v1 hierarchies
// (/sys/fs/cgroup/memory, ...), from /proc/self/mountinfo.
func cgroupV1Mounts() ([]string, error) {
	ms, err := mountinfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.fstype == "cgroup" {
			out = append(out, m.point)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup v1 hierarchy is mounted")
	}
	return out, nil
}

// createCgroupRoot creates the cgroup root (e.g. /widget-node-x) in every
// v1 hierarchy: kubelet's cgroupfs driver requires it to exist. A new
// cpuset cgroup starts with no CPUs and memory nodes: it gets its parent's.
func createCgroupRoot(root string) error {
	ms, err := cgroupV1Mounts()
	if err != nil {
		return err
	}
	for _, m := range ms {
		d := filepath.Join(m, root)
		if err := os.MkdirAll(d, 0o755); err != nil { //nolint:gosec // cgroup directories are world-readable by design
			return errors.Wrapf(err, "cannot create cgroup %s", d)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(m, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil { //nolint:gosec // see above
				return errors.Wrapf(err, "cannot set %s of cgroup %s", f, d)
			}
		}
	}
	return nil
}

// cgroupDirs returns every cgroup directory at or below root in every v1
// hierarchy, deepest first.
func cgroupDirs(root string) []string {
	ms, err := cgroupV1Mounts()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, m := range ms {
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// cgroupPIDs returns the processes in the cgroups at or below root.
func cgroupPIDs(root string) []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range cgroupDirs(root) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// removeCgroupRoot kills what is left in the cgroups at or below root and
// removes them.
func removeCgroupRoot(root string) error {
	for _, pid := range cgroupPIDs(root) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	var last error
	for range 50 {
		last = nil
		for _, d := range cgroupDirs(root) {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				last = errors.Wrapf(err, "cannot remove cgroup %s", d)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // killed processes leave their cgroups asynchronously
	}
	return last
}

type mount struct{ point, fstype string }

// mountinfo parses /proc/self/mountinfo.
func mountinfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, errors.Wrap(err, "cannot read mountinfo")
	}
	defer f.Close() //nolint:errcheck // read only
	var out []mount
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		fs := strings.Fields(s.Text())
		if len(fs) < 7 {
			continue
		}
		var typ string
		for i, x := range fs {
			if x == "-" && i+1 < len(fs) {
				typ = fs[i+1]
				break
			}
		}
		out = append(out, mount{point: unescapeOctal(fs[4]), fstype: typ})
	}
	return out, errors.Wrap(s.Err(), "cannot read mountinfo")
}

// unescapeOctal undoes mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	ms, err := mountinfo()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unmountUnder detaches every mount at or below dir.
func unmountUnder(dir string) error {
	var errs []error
	for _, p := range mountsUnder(dir) {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, errors.Wrapf(err, "cannot unmount %s", p))
		}
	}
	return errors.Join(errs...)
}

// RemoveDir removes dir, and first detaches whatever is mounted at or below
// it (a node killed mid-run leaves its containers' root filesystems and
// volumes mounted there), so that nothing is removed through a mount.
func RemoveDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return errors.Wrapf(err, "cannot remove %s", dir)
	}
	if err := unmountUnder(abs); err != nil {
		return errors.Wrapf(err, "cannot remove %s", dir)
	}
	return errors.Wrapf(os.RemoveAll(abs), "cannot remove %s", dir)
}

// processesMentioning returns "pid: cmdline" of every process whose command
// line mentions s (the node's directory: containerd, kubelet and the shims
// all name it in their arguments).
func processesMentioning(s string) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	out := make([]string, 0, 4)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
			if len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
				continue // a zombie is its parent's business
			}
		}
		out = append(out, fmt.Sprintf("%d: %s", pid, strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))))
	}
	return out
}

// killMentioning SIGKILLs every process processesMentioning(s) finds.
func killMentioning(s string) {
	for _, p := range processesMentioning(s) {
		if pid, err := strconv.Atoi(p[:strings.IndexByte(p, ':')]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// ip runs the ip command.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput() //nolint:noctx // a quick local change that teardown (no ctx) needs too; cut short, it leaves a half-made link
	if err != nil {
		return errors.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// linkExists reports whether the network link name exists.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// CreateBridge creates the bridge a node's pods join, with the node's
// address (the first of podCIDR) on it, and returns that address: for a
// caller that serves on the node's address before the node starts
// (Options.BridgeCreated). DeleteBridge removes it.
func CreateBridge(name, podCIDR string) (string, error) {
	cidr, gw, err := gateway(podCIDR)
	if err != nil {
		return "", err
	}
	ones, _ := cidr.Mask.Size()
	return gw.String(), createBridge(name, fmt.Sprintf("%s/%d", gw, ones))
}

// gateway parses the pod range and returns it and its first address, the
// node's.
func gateway(podCIDR string) (*net.IPNet, net.IP, error) {
	_, cidr, err := net.ParseCIDR(podCIDR)
	if err != nil || cidr.IP.To4() == nil {
		return nil, nil, errors.Errorf("pod CIDR %q is not an IPv4 range", podCIDR)
	}
	gw := make(net.IP, 4)
	copy(gw, cidr.IP.To4())
	gw[3]++
	return cidr, gw, nil
}

// DeleteBridge deletes the bridge CreateBridge created, if it exists.
func DeleteBridge(name string) error {
	if !linkExists(name) {
		return nil
	}
	return ip("link", "del", name)
}

// createBridge creates the bridge the pods' veths join, with the node's
// address (the pod range's gateway) on it.
func createBridge(name, cidr string) error {
	if linkExists(name) {
		return errors.Errorf("network link %s already exists (left by an earlier run? delete it with: ip link del %s)", name, name)
	}
	if err := ip("link", "add", name, "type", "bridge"); err != nil {
		return err
	}
	if err := ip("addr", "add", cidr, "dev", name); err != nil {
		return err
	}
	return ip("link", "set", name, "up")
}

// bridgePorts returns the links attached to the bridge (the pods' veths).
func bridgePorts(bridge string) []string {
	var out []string
	for _, l := range links() {
		if t, err := os.Readlink(filepath.Join("/sys/class/net", l, "master")); err == nil && filepath.Base(t) == bridge {
			out = append(out, l)
		}
	}
	return out
}

// links returns the names of the network links in this namespace.
func links() []string {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// entries returns the names in dir (none when it does not exist).
func entries(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// added returns the elements of now that are not in before.
func added(before, now []string) []string {
	had := make(map[string]bool, len(before))
	for _, x := range before {
		had[x] = true
	}
	var out []string
	for _, x := range now {
		if !had[x] {
			out = append(out, x)
		}
	}
	return out
}

// stopTimeout bounds each teardown step that talks to containerd.
const stopTimeout = 30 * time.Second

// killPID sends SIGKILL to pid, ignoring a process that is already gone.
func killPID(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
