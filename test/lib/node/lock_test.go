package node

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLockKeepsRecord: a holder that tears down what it started releases
// the lock empty; one that could not tear down a killed run's leftovers
// unlocks and keeps the record, so that the next holder tries again rather
// than starting beside them.
func TestLockKeepsRecord(t *testing.T) {
	machine := lockFile
	t.Cleanup(func() { lockFile = machine })
	lockFile = filepath.Join(t.TempDir(), "node.lock")
	killed := RunRecord{PID: 42, Dir: "/tmp/wcl-killed", CgroupRoot: "/widget-node-x", Bridge: "wcluster0"}
	take := func() (*MachineLock, *RunRecord) {
		t.Helper()
		l, prev, err := LockMachine(context.Background(), func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		return l, prev
	}

	l, prev := take()
	if prev != nil {
		t.Fatalf("a new lock file names a run: %+v", prev)
	}
	if err := l.Record(killed); err != nil {
		t.Fatal(err)
	}
	l.Unlock() // as a killed holder's lock ends: the record stays

	l, prev = take()
	if diff := cmp.Diff(&killed, prev); diff != "" {
		t.Fatalf("the killed run's record: -want, +got:\n%s", diff)
	}
	l.Unlock() // its leftovers could not be torn down

	l, prev = take()
	if diff := cmp.Diff(&killed, prev); diff != "" {
		t.Fatalf("after a failed teardown the record must stay: -want, +got:\n%s", diff)
	}
	l.Release() // torn down

	l, prev = take()
	if prev != nil {
		t.Errorf("after a release the lock still names a run: %+v", prev)
	}
	l.Release()
}
