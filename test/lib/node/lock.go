//go:build linux

package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// lockDir holds the machine lock.
const lockDir = "/run/lock"

// lockFile is the machine lock's file.
var lockFile = filepath.Join(lockDir, "crossplane-widget-node.lock")

// A MachineLock is held by the one node (or cluster) running on this
// machine: nodes share fixed paths (/run/containerd/s,
// /var/lib/kubelet/device-plugins, /var/log/containers) and machine-wide
// sysctls, so two at once could not tell each other's leftovers from their
// own. It is an flock, which the kernel releases when the holder dies.
// While a node runs, the lock file records what to tear down should its
// process be killed (Record); Release empties it.
type MachineLock struct {
	f *os.File
}

// A RunRecord is what a running node leaves in the lock file.
type RunRecord struct {
	PID int `json:"pid"`
	// Dir is the node's (or cluster's) directory: every process that
	// names it is the run's.
	Dir        string `json:"dir"`
	CgroupRoot string `json:"cgroupRoot,omitempty"`
	Bridge     string `json:"bridge,omitempty"`
	// Nodes are the run's further nodes (a cluster of several), each with
	// its directory, cgroup root and bridge.
	Nodes []RunRecord `json:"nodes,omitempty"`
}

// LockMachine takes the machine lock, waiting (and calling waiting every
// 15s) while another node holds it, and returns the record a holder that
// was killed left, if any: the caller tears that down (Reclaim) first.
func LockMachine(ctx context.Context, waiting func(holder string)) (*MachineLock, *RunRecord, error) {
	path := lockFile
	if err := os.MkdirAll(lockDir, 0o755); err != nil { //nolint:gosec // /run/lock is world-readable by convention
		return nil, nil, errors.Wrapf(err, "cannot create %s", lockDir)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "cannot open lock file %s", path)
	}
	said := time.Time{}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, nil, errors.Wrapf(err, "cannot lock %s", path)
		}
		if time.Since(said) > 15*time.Second {
			r := readRecord(f)
			waiting("pid " + strconv.Itoa(r.PID) + " in " + r.Dir)
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, nil, errors.Errorf("another node (pid %d, in %s) holds %s: wait for it to end or stop it", readRecord(f).PID, readRecord(f).Dir, path)
		case <-time.After(time.Second):
		}
	}
	l := &MachineLock{f: f}
	prev := readRecord(f)
	if prev.Dir == "" {
		return l, nil, nil
	}
	return l, &prev, nil
}

func readRecord(f *os.File) RunRecord {
	var r RunRecord
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	_ = json.Unmarshal(b[:n], &r)
	return r
}

// Record replaces the lock file's record.
func (l *MachineLock) Record(r RunRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return errors.Wrap(err, "cannot encode the run record")
	}
	if err := l.f.Truncate(0); err != nil {
		return errors.Wrap(err, "cannot write the run record")
	}
	_, err = l.f.WriteAt(b, 0)
	return errors.Wrap(err, "cannot write the run record")
}

// Unlock unlocks and keeps the record, for a holder that could not tear
// down what the record names: the next holder tries again.
func (l *MachineLock) Unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

// Release empties the record (nothing left to tear down) and unlocks.
func (l *MachineLock) Release() {
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
