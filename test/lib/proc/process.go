package proc

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 10 * time.Second

// Command describes a process to run: the cluster's components (etcd aside,
// which envtest runs), the provider in its integration suite.
type Command struct {
	// Path is the binary to run (looked up in $PATH when it has no slash).
	Path string
	// Args are the arguments after the binary name.
	Args []string
	// Env is the process's environment as the caller builds it: New takes
	// the whole environment separately and expects these pairs in it.
	Env []string
	// Dir is the working directory.
	Dir string
}

// A Process is a supervised child process. It runs in its own process
// group, so stopping it also stops anything it started, and it is killed if
// the test process dies (Linux parent-death signal). Its stdout and stderr
// are appended to LogPath across restarts. Methods are safe for concurrent
// use.
type Process struct {
	name    string
	cmd     Command
	env     []string
	logPath string
	log     *slog.Logger

	mu   sync.Mutex
	c    *exec.Cmd
	done chan struct{}
	err  error
}

// New returns a Process that runs cmd with the environment env (cmd.Env is
// expected to be part of it already), appending its output to logPath. It
// does not start it.
func New(name string, cmd Command, env []string, logPath string, log *slog.Logger) *Process {
	return &Process{name: name, cmd: cmd, env: env, logPath: logPath, log: log.With("process", name)}
}

// Name is the process's name in logs and diagnostics.
func (p *Process) Name() string { return p.name }

// LogPath is the file the process's output is appended to.
func (p *Process) LogPath() string { return p.logPath }

// PID is the process ID of the current run, or 0 when it is not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil || p.exitedLocked() {
		return 0
	}
	return p.c.Process.Pid
}

// Running reports whether the process has been started and not yet exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c != nil && !p.exitedLocked()
}

// Exited returns a channel that is closed when the current run exits. It is
// nil when the process was never started.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Err returns how the last run ended (nil while running or after a clean
// exit).
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *Process) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts the process. It is a no-op when the process is running.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil && !p.exitedLocked() {
		return nil
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return errors.Wrapf(err, "cannot open log file for %s", p.name)
	}
	// Not CommandContext: the process outlives this call, and Stop and Kill
	// end it by signalling its whole process group, which a context's
	// cancellation (SIGKILL to the leader only) would not.
	c := exec.Command(p.cmd.Path, p.cmd.Args...) //nolint:gosec,noctx // Runs the binary its caller names; see above.
	c.Env = p.env
	c.Dir = p.cmd.Dir
	c.Stdout = f
	c.Stderr = f
	c.SysProcAttr = SysProcAttr()
	_, _ = fmt.Fprintf(f, "=== proc: %s starting %s %s\n", time.Now().Format(time.RFC3339), p.cmd.Path, strings.Join(p.cmd.Args, " "))
	if err := c.Start(); err != nil {
		_ = f.Close()
		return errors.Wrapf(err, "cannot start %s", p.name)
	}
	done := make(chan struct{})
	p.c, p.done, p.err = c, done, nil
	p.log.Debug("Started process", "pid", c.Process.Pid, "log", p.logPath)
	go func() {
		err := c.Wait()
		_ = f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
		p.log.Debug("Process exited", "pid", c.Process.Pid, "error", err)
	}()
	return nil
}

// Stop sends SIGTERM to the process group, waits up to 10s for the process to
// exit, then sends SIGKILL. It returns once the process has exited; it is a
// no-op when the process is not running.
func (p *Process) Stop() error { return p.signal(syscall.SIGTERM, stopGrace) }

// Kill sends SIGKILL to the process group (a crash, as far as the process is
// concerned) and waits for it to exit.
func (p *Process) Kill() error { return p.signal(syscall.SIGKILL, stopGrace) }

// Restart stops the process (gracefully) and starts it again with the same
// command.
func (p *Process) Restart() error {
	if err := p.Stop(); err != nil {
		return err
	}
	return p.Start()
}

func (p *Process) signal(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	c, done := p.c, p.done
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	pgid := c.Process.Pid
	select {
	case <-done:
	default:
		_ = syscall.Kill(-pgid, sig)
		select {
		case <-done:
		case <-time.After(grace):
			p.log.Info("Process did not exit in time; killing it", "pid", pgid, "grace", grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			select {
			case <-done:
			case <-time.After(grace):
				return errors.Errorf("cannot stop %s: pid %d survived SIGKILL", p.name, pgid)
			}
		}
	}
	// Whatever the leader started shares its process group: make sure it is
	// gone too before reporting the process stopped.
	deadline := time.Now().Add(grace)
	for groupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if time.Now().After(deadline) {
			return errors.Errorf("cannot stop %s: processes in group %d survived SIGKILL", p.name, pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
