//go:build linux

package cluster

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

// lockDir holds the machine locks of clusters.
const lockDir = "/run/lock"

// A machineLock is held by the one cluster on this machine that uses a
// bridge (and its address ranges): an flock, which the kernel releases
// when the holder dies. While the cluster runs, the lock file records what
// to tear down should its process be killed; Stop empties it.
type machineLock struct {
	f *os.File
}

// runRecord is what a running cluster leaves in its lock file.
type runRecord struct {
	PID        int    `json:"pid"`
	Dir        string `json:"dir"`
	CgroupRoot string `json:"cgroupRoot,omitempty"`
}

// lockMachine takes the lock for bridge, waiting (and saying so every 15s)
// while another cluster holds it, and returns the record a killed holder
// left, if any.
func lockMachine(ctx context.Context, bridge string, waiting func(holder string)) (*machineLock, *runRecord, error) {
	path := filepath.Join(lockDir, "crossplane-widget-cluster-"+bridge+".lock")
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
			return nil, nil, errors.Errorf("another cluster holds %s (%s): wait for it to end or stop it", path, readRecord(f).Dir)
		case <-time.After(time.Second):
		}
	}
	l := &machineLock{f: f}
	prev := readRecord(f)
	if prev.Dir == "" {
		return l, nil, nil
	}
	return l, &prev, nil
}

func readRecord(f *os.File) runRecord {
	var r runRecord
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	_ = json.Unmarshal(b[:n], &r)
	return r
}

// record replaces the lock file's record.
func (l *machineLock) record(r runRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return errors.Wrap(err, "cannot encode the cluster's run record")
	}
	if err := l.f.Truncate(0); err != nil {
		return errors.Wrap(err, "cannot write the cluster's run record")
	}
	_, err = l.f.WriteAt(b, 0)
	return errors.Wrap(err, "cannot write the cluster's run record")
}

// release empties the record (nothing left to tear down) and unlocks.
func (l *machineLock) release() {
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
