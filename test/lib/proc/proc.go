// Package proc builds the project's binaries once per run and finds free
// loopback ports for the processes tests start.
package proc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// builds holds one entry per package: every caller in a process waits for,
// and gets, the same build.
var (
	mu     sync.Mutex
	dir    string
	builds = map[string]*build{}
)

type build struct {
	once sync.Once
	bin  string
	err  error
}

// TestHooks is the build tag of the test hooks (provider/testhooks.go):
// binaries Build makes carry them, the packages Crossplane installs do not.
const TestHooks = "testhooks"

// Build builds the main package pkg (an import path of this module, e.g.
// github.com/widgetco/crossplane-widget/provider) once per process, with
// the module's go.mod and the TestHooks tag, and returns the binary's path. Concurrent and later
// calls for the same package wait for and share that build. Binaries live
// in a temporary directory of this process that Clean removes (or the
// next process to build, once this one has ended).
func Build(ctx context.Context, pkg string) (string, error) {
	mu.Lock()
	if dir == "" {
		pruneDead()
		d := filepath.Join(os.TempDir(), prefix+strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(d, 0o750); err != nil {
			mu.Unlock()
			return "", fmt.Errorf("cannot make a directory for binaries: %w", err)
		}
		dir = d
	}
	b, ok := builds[pkg]
	if !ok {
		b = &build{}
		builds[pkg] = b
	}
	bin := filepath.Join(dir, path.Base(pkg)+"-"+strconv.Itoa(len(builds)))
	mu.Unlock()

	b.once.Do(func() {
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", TestHooks, "-o", bin, pkg) //nolint:gosec // pkg names a package of this module
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("cannot build %s: %w\n%s", pkg, err, out)
			return
		}
		b.bin = bin
	})
	return b.bin, b.err
}

// prefix names the per-process directories of binaries: prefix + PID.
const prefix = "widget-bins-"

// pruneDead removes the binaries of test processes that have ended without
// calling Clean, so that they do not pile up in the temporary directory.
func pruneDead() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), prefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); os.IsNotExist(err) {
			_ = os.RemoveAll(d)
		}
	}
}

// Clean removes every binary Build made. Later calls to Build build again.
func Clean() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	dir, builds = "", map[string]*build{}
}

// FreePort returns a TCP port that is free on 127.0.0.1 right now, for the
// flags of a process about to start. Another process may take it first; a
// process that cannot bind it fails loudly.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:noctx // ctx-free by design: Listen's context only bounds resolving the address, and callers pass a literal IP
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer l.Close() //nolint:errcheck // only probing for a port
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("cannot find a free port: unexpected address %v", l.Addr())
	}
	return a.Port, nil
}

// FreeAddr returns "127.0.0.1:PORT" for a port that is free right now.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
