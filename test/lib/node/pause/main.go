// Command pause is the sandbox ("pause") container of the project's own
// node (test/lib/node), built from this repository instead of pulled from a
// public registry. It prints one line, then sleeps until SIGTERM or SIGINT,
// reaping any child that is re-parented to it (it is PID 1 of the pod's PID
// namespace when the pod shares one).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	fmt.Println("pause: started")
	for s := range sigs {
		if s != syscall.SIGCHLD {
			fmt.Printf("pause: %v, exiting\n", s)
			return
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
