package harness

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// dataLink is the symbolic link in a volume directory that names the
// directory holding the volume's current files, as a kubelet lays out
// Secret, ConfigMap and projected volumes.
const dataLink = "..data"

// writeAtomic replaces the files of the volume directory dir with files
// (path relative to the volume, e.g. "token") so that a reader never sees a
// partial file nor a mix of old and new files: the new files go into a new
// hidden directory (..<timestamp>), the symbolic link ..data is pointed at it
// with a rename (atomic), and each top-level name in dir is a symbolic link
// through ..data (token -> ..data/token), made once. The previous hidden
// directory is removed afterwards; a reader that opened a file before the
// swap keeps reading the old file to its end. Names dir held before and
// files lacks are removed. Files are root-owned, mode 0644, as without an
// fsGroup; every link is relative, so it resolves the same inside the
// container's root.
func writeAtomic(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
		return err
	}
	for name := range files {
		// As the API validates a projection's path: relative, no ".."
		// element (nor a name starting with "..", which would be one of
		// the volume's own).
		if rel := filepath.ToSlash(filepath.Clean(name)); filepath.IsAbs(name) || rel == "." || strings.HasPrefix(rel, "..") || strings.Contains(name, "..") {
			return errors.Errorf("volume path %q is not allowed", name)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	gen, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.")) //nolint:usetesting // Not a test.
	if err != nil {
		return errors.Wrap(err, "cannot create the volume's next data directory")
	}
	if err := os.Chmod(gen, 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
		return err
	}
	top := map[string]bool{}
	for name, data := range files {
		rel := filepath.Clean(name)
		dst := filepath.Join(gen, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil { //nolint:gosec // Secret and projected volumes default to 0644.
			return err
		}
		first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		top[first] = true
	}
	tmp := filepath.Join(dir, dataLink+"_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		return errors.Wrap(err, "cannot link the volume's next data directory")
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return errors.Wrap(err, "cannot switch the volume to its next data directory")
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, name), link); err != nil {
			return errors.Wrapf(err, "cannot link %s into the volume", name)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "..") || top[n] {
			continue
		}
		_ = os.Remove(filepath.Join(dir, n))
	}
	if old != "" && old != filepath.Base(gen) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
