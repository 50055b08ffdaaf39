package harness

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// TestPodNetSparesOtherChildren: a pod's thread may be the thread that
// started another child (with a parent-death signal, as the harness starts
// core); ending the pod must not end that thread, or the kernel kills the
// child. Here the same thread starts a child and then serves a pod.
func TestPodNetSparesOtherChildren(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pods need root")
	}
	child := proc.New("sleeper", proc.Command{Path: "sleep", Args: []string{"60"}}, os.Environ(), t.TempDir()+"/sleeper.log", testLogger(t))
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// Not on the main thread: Go never ends that one, so it would
		// prove nothing.
		for unix.Gettid() == os.Getpid() {
			runtime.UnlockOSThread()
			time.Sleep(time.Millisecond)
			runtime.LockOSThread()
		}
		if err := child.Start(); err != nil {
			done <- err
			return
		}
		n := &podNet{reqs: make(chan func()), done: make(chan struct{})}
		ready := make(chan error, 1)
		n.close() // Serve, then end at once.
		n.serve("sparing", ready)
		done <- <-ready
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defer child.Stop()
	// The goroutine has ended; had it taken its thread with it, the child
	// got SIGKILL.
	time.Sleep(200 * time.Millisecond)
	if !child.Running() {
		t.Fatalf("the child started from the pod's thread died when the pod ended (%v)", child.Err())
	}
	if err := syscall.Kill(child.PID(), 0); err != nil {
		t.Fatalf("the child is gone: %v", err)
	}
}
