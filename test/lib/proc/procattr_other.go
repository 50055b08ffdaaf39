//go:build !linux

package proc

import (
	"syscall"
)

// SysProcAttr puts a child in its own process group so the caller can
// signal it and everything it started.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether any process of the process group still exists.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}
