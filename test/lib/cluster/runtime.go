//go:build linux

package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// RuntimeContainer is the container Crossplane's package manager runs a
// package's binary in.
const RuntimeContainer = "package-runtime"

// A Runtime is the pods kubelet runs for a Provider or Function: those of
// its revisions' Deployments in Crossplane's namespace. Kill, stop and
// freeze it the way a failing node or process would.
type Runtime struct {
	c *Cluster
	// label selects the package's pods: Crossplane labels them
	// pkg.crossplane.io/provider or /function with the package's name.
	label, name string
}

// Provider is the runtime of the Provider name.
func (c *Cluster) Provider(name string) *Runtime {
	return &Runtime{c: c, label: "pkg.crossplane.io/provider", name: name}
}

// Function is the runtime of the Function name.
func (c *Cluster) Function(name string) *Runtime {
	return &Runtime{c: c, label: "pkg.crossplane.io/function", name: name}
}

// Pods are the runtime's pods that are not being deleted, by name.
func (r *Runtime) Pods() []*Pod {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := &corev1.PodList{}
	if err := r.c.Kube.Client.List(ctx, l, client.InNamespace(CrossplaneNamespace), client.MatchingLabels{r.label: r.name}); err != nil {
		return nil
	}
	out := make([]*Pod, 0, len(l.Items))
	for i := range l.Items {
		if l.Items[i].DeletionTimestamp == nil {
			out = append(out, &Pod{c: r.c, pod: l.Items[i].DeepCopy()})
		}
	}
	return out
}

// Running is true when a pod of the runtime is Ready.
func (r *Runtime) Running() bool {
	for _, p := range r.Pods() {
		if p.Ready() {
			return true
		}
	}
	return false
}

// Kill SIGKILLs the package's container in every pod of the runtime;
// kubelet starts them again.
func (r *Runtime) Kill() error {
	pods := r.Pods()
	if len(pods) == 0 {
		return errors.Errorf("%s %s has no pods", r.label, r.name)
	}
	errs := make([]error, 0, len(pods))
	for _, p := range pods {
		errs = append(errs, p.Kill())
	}
	return errors.Join(errs...)
}

// Freeze stops (SIGSTOP) every process of the package's container in
// every pod of the runtime: a hung process. kubelet's probes fail, the pods
// go unready (and, if frozen for longer than the liveness probe allows,
// kubelet restarts the containers). Thaw lets them run again.
func (r *Runtime) Freeze() error { return r.signal(syscall.SIGSTOP) }

// Thaw continues (SIGCONT) what Freeze stopped.
func (r *Runtime) Thaw() error { return r.signal(syscall.SIGCONT) }

func (r *Runtime) signal(sig syscall.Signal) error {
	pods := r.Pods()
	if len(pods) == 0 {
		return errors.Errorf("%s %s has no pods", r.label, r.name)
	}
	for _, p := range pods {
		pids, err := p.containerPIDs(RuntimeContainer)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return errors.Wrapf(err, "cannot signal process %d of pod %s", pid, p.Name())
			}
		}
	}
	return nil
}

// WaitRunning waits until a pod of the runtime is Ready.
func (r *Runtime) WaitRunning(ctx context.Context) error {
	for {
		if r.Running() { //nolint:contextcheck // Running bounds each poll (30s); ctx is checked between polls
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("%s %s has no Ready pod: %v", r.label, r.name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// A Pod is one pod of a runtime, as it was when listed.
type Pod struct {
	c   *Cluster
	pod *corev1.Pod
}

// Name is the pod's name.
func (p *Pod) Name() string { return p.pod.Name }

// Object is the pod as it was when listed.
func (p *Pod) Object() *corev1.Pod { return p.pod.DeepCopy() }

// Current is the pod as it is now.
func (p *Pod) Current(ctx context.Context) (*corev1.Pod, error) {
	cur := &corev1.Pod{}
	if err := p.c.Kube.Client.Get(ctx, client.ObjectKeyFromObject(p.pod), cur); err != nil {
		return nil, errors.Wrapf(err, "cannot get pod %s", p.pod.Name)
	}
	return cur, nil
}

// ContainerCgroup is the directory of the pod's container name, as it runs
// now, in the cgroup v1 hierarchy of controller ("memory", say).
func (p *Pod) ContainerCgroup(ctx context.Context, controller, name string) (string, error) {
	cur, err := p.Current(ctx)
	if err != nil {
		return "", err
	}
	for _, s := range cur.Status.ContainerStatuses {
		if s.Name == name && s.ContainerID != "" {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			return p.c.ContainerCgroup(controller, id)
		}
	}
	return "", errors.Errorf("pod %s runs no container %s", p.pod.Name, name)
}

// Ready is true when the pod was Ready when listed.
func (p *Pod) Ready() bool {
	for _, c := range p.pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Forward returns the address of port on the pod: its own IP, which the
// node routes to.
func (p *Pod) Forward(port int) (string, error) {
	if p.c.remote {
		return "", errors.Wrapf(ErrNotLocal, "cannot reach pod %s's address", p.pod.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cur, err := p.Current(ctx)
	if err != nil {
		return "", err
	}
	if cur.Status.PodIP == "" {
		return "", errors.Errorf("pod %s has no IP", p.pod.Name)
	}
	return net.JoinHostPort(cur.Status.PodIP, strconv.Itoa(port)), nil
}

// Kill SIGKILLs every process of the package's container; kubelet starts
// it again.
func (p *Pod) Kill() error {
	pids, err := p.containerPIDs(RuntimeContainer)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return errors.Wrapf(err, "cannot kill process %d of pod %s", pid, p.pod.Name)
		}
	}
	return nil
}

// ContainerPID is the oldest process of the pod's container name (its
// entrypoint, the lowest PID unless PIDs wrapped), or 0 when it has none.
func (p *Pod) ContainerPID(name string) int {
	pids, err := p.containerPIDs(name)
	if err != nil || len(pids) == 0 {
		return 0
	}
	return slices.Min(pids)
}

// containerPIDs lists the processes in the memory cgroup of the pod's
// container name, as it runs now.
func (p *Pod) containerPIDs(name string) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := p.ContainerCgroup(ctx, "memory", name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list the processes of pod %s's container %s", p.pod.Name, name)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
