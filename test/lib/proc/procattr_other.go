//go:build !linux

package proc

import (
	"errors"
	"syscall"
)

// SysProcAttr puts a child in its own process group so the caller can
// signal it and everything it started.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// sandbox refuses a Root or User: only Linux supports them here.
func sandbox(_ *syscall.SysProcAttr, c Command) error {
	if c.Root != "" || c.User != nil {
		return errors.New("a process root or user needs Linux")
	}
	return nil
}

// groupAlive reports whether any process of the process group still exists.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}
