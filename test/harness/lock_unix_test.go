//go:build unix

package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "e2e-harness")
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock(2) locks belong to the open file description, so a second
	// open in this process conflicts as another process's would.
	if _, err := LockDir(dir); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("a second LockDir: want an error naming pid %d, got %v", os.Getpid(), err)
	}
	unlock()
	unlock2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after unlock: %v", err)
	}
	unlock2()
}

// TestLockDirInFreshClone takes the lock where its directory does not
// exist yet, as the e2e bench does in a fresh clone (no _output/bench).
func TestLockDirInFreshClone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "_output", "bench", "e2e-harness")
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir(%s) whose parent does not exist: %v", dir, err)
	}
	unlock()
}

// TestLockDirReleasedOnExit checks that a process killed while it holds the
// lock does not leave it held.
func TestLockDirReleasedOnExit(t *testing.T) {
	if os.Getenv("HARNESS_LOCK_CHILD") != "" {
		if _, err := LockDir(os.Getenv("HARNESS_LOCK_CHILD")); err != nil {
			os.Exit(3)
		}
		_, _ = os.Stdout.WriteString("locked\n")
		select {} // until killed
	}
	dir := filepath.Join(t.TempDir(), "e2e-harness")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLockDirReleasedOnExit$")
	cmd.Env = append(os.Environ(), "HARNESS_LOCK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("the child did not take the lock: %q, %v", buf, err)
	}
	if _, err := LockDir(dir); err == nil {
		t.Fatal("LockDir succeeded while the child held the lock")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after the holder was killed: %v", err)
	}
	unlock()
}
