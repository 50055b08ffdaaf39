package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// SysProcAttr puts a child in its own process group (so the caller can
// signal it and everything it started) and has the kernel kill it when the
// test process dies, so a crashed test leaves nothing behind.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether any process of the process group is still
// running. Zombies do not count: once killed, orphans are the reaper's
// business.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised name: state ppid pgrp ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}
