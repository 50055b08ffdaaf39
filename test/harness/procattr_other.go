//go:build !linux

package harness

import "syscall"

// sysProcAttr puts a child in its own process group so the harness can
// signal it and everything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether any process of the process group still exists.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}
