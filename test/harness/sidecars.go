package harness

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// A sidecar is a container of a pod after the first, such as a change logs
// sidecar a DeploymentRuntimeConfig adds to a provider's pod. It shares the
// pod's sandbox (network and UTS namespaces, so it and the first container
// reach each other on 127.0.0.1) and its volumes (an emptyDir is the same
// directory in both), runs in a root of its own built from its image, and
// restarts when it exits, as the first container does. The pod is ready
// only while every sidecar runs. Probes of sidecars are not run: a sidecar
// counts as ready while it runs.
type sidecar struct {
	p    *pod
	c    corev1.Container
	root string

	rootReady bool

	mu       sync.Mutex
	proc     *proc.Process
	running  bool
	state    string
	restarts int
}

func newSidecar(p *pod, c corev1.Container) *sidecar {
	return &sidecar{p: p, c: c, root: filepath.Join(p.dir, "containers", c.Name, "root"), state: "ContainerCreating"}
}

// logPath is where the sidecar logs, across restarts:
// pod-<pod>-<container>.log next to the first container's pod-<pod>.log.
func (s *sidecar) logPath() string {
	return filepath.Join(s.p.logDir, "pod-"+s.p.name+"-"+s.c.Name+".log")
}

func (s *sidecar) status() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.state
}

func (s *sidecar) setState(running bool, state string) {
	s.mu.Lock()
	changed := s.running != running || s.state != state
	s.running, s.state = running, state
	s.mu.Unlock()
	if changed {
		s.p.log.Info("Container changed", "container", s.c.Name, "running", running, "state", state)
	}
}

func (s *sidecar) process() *proc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// supervise keeps the sidecar running until ctx is done, restarting it with
// the first container's backoff.
func (s *sidecar) supervise(ctx context.Context) {
	backoff := restartBackoffMin
	for ctx.Err() == nil {
		started := time.Now()
		err := s.run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 10*time.Minute {
			backoff = restartBackoffMin
		}
		s.setState(false, "CrashLoopBackOff: "+err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartBackoffMax)
	}
}

// run starts the sidecar and returns when it has ended.
func (s *sidecar) run(ctx context.Context) error {
	if err := s.p.sandbox(ctx); err != nil {
		return err
	}
	cmd, err := s.p.command(ctx, s.c, s.root, &s.rootReady)
	if err != nil {
		return err
	}
	pr := proc.New(s.p.name+"/"+s.c.Name, cmd, cmd.Env, s.logPath(), s.p.log)
	if err := pr.Start(); err != nil {
		return errors.Wrap(err, "cannot start the container")
	}
	s.mu.Lock()
	s.proc = pr
	s.restarts++
	s.mu.Unlock()
	s.setState(true, "Running")
	defer func() { _ = pr.Stop() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-pr.Exited():
		return errors.Errorf("container exited (%v): %s", pr.Err(), tailFile(pr.LogPath(), 3))
	}
}

// stop stops the sidecar's process; the pod has cancelled its supervisor.
func (s *sidecar) stop() error {
	if pr := s.process(); pr != nil {
		return pr.Stop()
	}
	return nil
}

// ContainerLogs returns the log file of every container named name that
// the node has run, in pods that still run and pods that are gone, e.g.
// every change logs sidecar's. A container after a pod's first logs to
// logs/pod-<pod>-<container>.log.
func (h *Harness) ContainerLogs(name string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(h.dir, "logs", "pod-*-"+name+".log"))
	return files, errors.Wrapf(err, "cannot list the logs of containers named %s", name)
}

// ContainerPID is the process ID of the pod's container named name (the
// first container's or a sidecar's), or 0 when it is not running. Tests
// signal it, e.g. SIGSTOP to make a sidecar hang.
func (p *Pod) ContainerPID(name string) int {
	var pr *proc.Process
	if len(p.p.spec.Containers) > 0 && p.p.spec.Containers[0].Name == name {
		pr = p.p.process()
	}
	for _, s := range p.p.sidecars {
		if s.c.Name == name {
			pr = s.process()
		}
	}
	if pr == nil {
		return 0
	}
	return pr.PID()
}
