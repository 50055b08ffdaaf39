//go:build unix

package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// LockDir takes an exclusive lock on dir's lock file (dir + ".lock") for
// this process, so that two processes never run a control plane in the
// same directory: the second would remove the first's certificates and
// pods from under it. It fails at once, naming the holder, when another
// process holds the lock. The lock is released by unlock, or when the
// process ends however it ends.
func LockDir(dir string) (unlock func(), err error) {
	path := dir + ".lock"
	// A fresh clone has no _output yet: the lock is taken before the
	// control plane creates dir.
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, errors.Wrapf(err, "cannot create the directory of lock file %s", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot open lock file %s", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.Errorf("another process (pid %s) runs a control plane in %s: wait for it to end or stop it", orUnknown(holder), dir)
		}
		return nil, errors.Wrapf(err, "cannot lock %s", path)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

func orUnknown(pid []byte) string {
	if p := bytes.TrimSpace(pid); len(p) > 0 {
		return string(p)
	}
	return "unknown"
}
