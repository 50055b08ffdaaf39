package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// mounts are the bind mounts of a pod's emptyDir volumes into its
// containers' roots: every container that mounts the volume sees the same
// directory, as in a cluster (a unix socket one container creates there is
// one the other can connect to).
type mounts struct {
	mu      sync.Mutex
	targets []string
}

// bind mounts the directory src at target, creating target.
func (m *mounts) bind(src, target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
		return err
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return errors.Wrapf(err, "cannot bind-mount %s at %s", src, target)
	}
	m.mu.Lock()
	m.targets = append(m.targets, target)
	m.mu.Unlock()
	return nil
}

// unmountUnder unmounts every mount below dir (a container's root about to
// be made again), so that removing dir does not remove a shared volume's
// files.
func (m *mounts) unmountUnder(dir string) error {
	return m.unmount(func(t string) bool { return t == dir || strings.HasPrefix(t, dir+string(filepath.Separator)) })
}

// unmountAll unmounts every mount, when the pod stops.
func (m *mounts) unmountAll() error {
	return m.unmount(func(string) bool { return true })
}

func (m *mounts) unmount(match func(string) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	var keep []string
	// Last mounted first.
	for _, t := range slices.Backward(m.targets) {
		if !match(t) {
			keep = append(keep, t)
			continue
		}
		// Detach: a process of a stopped container may still hold it.
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, errors.Wrapf(err, "cannot unmount %s", t))
		}
	}
	slices.Reverse(keep)
	m.targets = keep
	return errors.Join(errs...)
}

// RemoveDir removes dir, a directory a previous harness left, unmounting
// first whatever that harness's pods left mounted below it. A harness killed
// before it stopped its pods (SIGKILL, a crash) leaves their volume mounts;
// removing the directory through them fails ("directory not empty"), after
// deleting what the mounts expose.
func RemoveDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return errors.Wrapf(err, "cannot remove %s", dir)
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return errors.Wrap(err, "cannot read this process's mounts")
	}
	var below []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		t := unescapeMount(f[1])
		if t == abs || strings.HasPrefix(t, abs+string(filepath.Separator)) {
			below = append(below, t)
		}
	}
	// Deepest first.
	slices.SortFunc(below, func(a, b string) int { return len(b) - len(a) })
	for _, t := range below {
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return errors.Wrapf(err, "cannot unmount %s, which a previous harness left mounted in %s", t, abs)
		}
	}
	return errors.Wrapf(os.RemoveAll(abs), "cannot remove %s", abs)
}

// unescapeMount undoes the octal escapes (\040 for a space) of a path in
// /proc/self/mounts.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}
