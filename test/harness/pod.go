package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// Restart backoff of a container that exits (restartPolicy Always).
const (
	restartBackoffMin = time.Second
	restartBackoffMax = 30 * time.Second
)

// A podEnv is what the node gives every pod.
type podEnv struct {
	kube      client.Client
	namespace string
	// apiHost and apiPort are the kube-apiserver's loopback address, which
	// the node forwards into every pod (KUBERNETES_SERVICE_HOST/PORT).
	apiHost, apiPort string
	apiCA            []byte
	// hostPorts are further host loopback addresses forwarded into every
	// pod at the same address: services outside the cluster, such as the
	// Widget API.
	hostPorts []string
	images    *images
	dir       string
	log       *slog.Logger
	// tokenRefresh, when positive, refreshes projected ServiceAccount
	// tokens at least this often (Options.ProjectedTokenRefresh).
	tokenRefresh time.Duration
	// tokens records every projected token written.
	tokens *tokenLedger
}

// A pod is one replica of a Deployment: a sandbox (network and UTS
// namespaces, volumes, a ServiceAccount token) and a process for each of its
// containers, each in a root filesystem built from its image, that the node
// keeps running. The first container is the package runtime, which the
// fields below describe; the others, sidecars, are in sidecars.go.
type pod struct {
	name   string
	deploy string
	hash   string
	labels map[string]string
	spec   corev1.PodSpec
	env    *podEnv
	log    *slog.Logger
	dir    string
	logDir string

	net       *podNet
	listeners []net.Listener
	rootReady bool
	// sandboxMu serializes the creation of the sandbox, which every
	// container needs.
	sandboxMu sync.Mutex
	// sidecars are the containers after the first.
	sidecars []*sidecar
	// mounts are the emptyDir and projected volumes bind-mounted into
	// containers' roots.
	mounts mounts
	// projDone are the projected volumes written, by name.
	projMu   sync.Mutex
	projDone map[string]bool

	mu       sync.Mutex
	proc     *proc.Process
	ready    bool
	state    string
	restarts int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newPod(e *podEnv, deploy, hash string, labels map[string]string, spec corev1.PodSpec) *pod {
	n := deploy + "-" + hash[:10] + "-" + randSuffix()
	p := &pod{
		name:   n,
		deploy: deploy,
		hash:   hash,
		labels: labels,
		spec:   spec,
		env:    e,
		log:    e.log.With("pod", n),
		dir:    filepath.Join(e.dir, "pods", n),
		logDir: filepath.Join(e.dir, "logs"),
		state:  "ContainerCreating",
	}
	for _, c := range spec.Containers[min(1, len(spec.Containers)):] {
		p.sidecars = append(p.sidecars, newSidecar(p, c))
	}
	return p
}

// dial connects to addr inside the pod, once its sandbox exists.
func (p *pod) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	n := p.net
	p.mu.Unlock()
	if n == nil {
		return nil, errors.Errorf("pod %s has no sandbox yet", p.name)
	}
	return n.dial(ctx, network, addr)
}

// logPath is where the container logs, across restarts.
func (p *pod) logPath() string { return filepath.Join(p.logDir, "pod-"+p.name+".log") }

// status reports whether the pod is ready - its first container is ready
// and every sidecar runs - and its state: the first container's, or that of
// a sidecar that does not run.
func (p *pod) status() (bool, string) {
	p.mu.Lock()
	ready, state := p.ready, p.state
	p.mu.Unlock()
	for _, s := range p.sidecars {
		if ok, st := s.status(); !ok {
			if ready {
				state = "container " + s.c.Name + ": " + st
			}
			ready = false
		}
	}
	return ready, state
}

func (p *pod) setState(ready bool, state string) {
	p.mu.Lock()
	changed := p.ready != ready || p.state != state
	p.ready, p.state = ready, state
	p.mu.Unlock()
	if changed {
		p.log.Info("Pod changed", "ready", ready, "state", state)
	}
}

// process is the container's current process, nil before it first starts.
func (p *pod) process() *proc.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// run creates the sandbox and keeps the container running until stop.
func (p *pod) run(ctx context.Context) {
	ctx, p.cancel = context.WithCancel(ctx)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.supervise(ctx)
	}()
	for _, s := range p.sidecars {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			s.supervise(ctx)
		}()
	}
}

// stop kills the container (SIGTERM, then SIGKILL after the grace period)
// and removes the sandbox.
func (p *pod) stop() error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	errs := make([]error, 0, len(p.sidecars)+2)
	if pr := p.process(); pr != nil {
		errs = append(errs, pr.Stop())
	}
	for _, s := range p.sidecars {
		errs = append(errs, s.stop())
	}
	errs = append(errs, p.mounts.unmountAll())
	for _, l := range p.listeners {
		_ = l.Close()
	}
	p.mu.Lock()
	n := p.net
	p.mu.Unlock()
	if n != nil {
		n.close()
	}
	p.setState(false, "Terminated")
	return errors.Join(errs...)
}

func (p *pod) supervise(ctx context.Context) {
	backoff := restartBackoffMin
	for ctx.Err() == nil {
		started := time.Now()
		err := p.runContainer(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 10*time.Minute {
			backoff = restartBackoffMin
		}
		p.setState(false, "CrashLoopBackOff: "+err.Error())
		p.log.Info("Container ended; restarting after a backoff", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartBackoffMax)
	}
}

// runContainer starts the container and returns when it has ended.
func (p *pod) runContainer(ctx context.Context) error {
	if err := p.sandbox(ctx); err != nil {
		return err
	}
	c := p.spec.Containers[0]
	cmd, err := p.command(ctx, c, filepath.Join(p.dir, "root"), &p.rootReady)
	if err != nil {
		return err
	}
	pr := proc.New(p.name, cmd, cmd.Env, p.logPath(), p.log)
	if err := pr.Start(); err != nil {
		return errors.Wrap(err, "cannot start the container")
	}
	p.mu.Lock()
	p.proc = pr
	p.restarts++
	p.mu.Unlock()
	p.setState(c.ReadinessProbe == nil, "Running")
	defer func() { _ = pr.Stop() }()
	return p.probe(ctx, c, pr)
}

// sandbox creates the pod's namespaces and the listeners that forward the
// kube-apiserver and the host ports into it, once per pod.
func (p *pod) sandbox(_ context.Context) error {
	p.sandboxMu.Lock()
	defer p.sandboxMu.Unlock()
	if p.net != nil {
		return nil
	}
	n, err := newPodNet(p.name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.net = n
	p.mu.Unlock()
	addrs := append([]string{net.JoinHostPort(p.env.apiHost, p.env.apiPort)}, p.env.hostPorts...)
	for _, a := range addrs {
		l, err := n.listen(a)
		if err != nil {
			return err
		}
		p.listeners = append(p.listeners, l)
		go forward(l, func(ctx context.Context) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", a)
		})
	}
	return nil
}

// command builds the container's process: the image's root (made at root
// unless rootReady says it was) with the pod's volumes, its entrypoint and
// arguments, its environment, its user.
func (p *pod) command(ctx context.Context, c corev1.Container, root string, rootReady *bool) (proc.Command, error) {
	img, err := p.env.images.get(ctx, c.Image, p.env.pullKeychain(ctx, p.spec))
	if err != nil {
		return proc.Command{}, errors.Wrap(err, "ImagePullBackOff")
	}
	// A pod's volumes (and, here, its root) outlive its containers: a
	// restarted container finds them as they were, even while the API server
	// is away.
	if !*rootReady {
		if err := p.makeRoot(ctx, root, img, c); err != nil {
			return proc.Command{}, err
		}
		*rootReady = true
	}
	env, err := p.environment(ctx, c, img)
	if err != nil {
		return proc.Command{}, err
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	argv := img.config.Entrypoint
	args := img.config.Cmd
	if len(c.Command) > 0 {
		argv, args = c.Command, nil
	}
	if len(c.Args) > 0 {
		args = c.Args
	}
	argv = append(expand(argv, vars), expand(args, vars)...)
	if len(argv) == 0 {
		return proc.Command{}, errors.Errorf("CreateContainerError: image %s has no entrypoint and the container no command", c.Image)
	}
	user, err := runAs(p.spec.SecurityContext, c.SecurityContext, img.config.User)
	if err != nil {
		return proc.Command{}, err
	}
	dir := c.WorkingDir
	if dir == "" {
		dir = img.config.WorkingDir
	}
	if dir == "" {
		dir = "/"
	}
	return proc.Command{
		Path:    argv[0],
		Args:    argv[1:],
		Env:     env,
		Dir:     dir,
		Root:    root,
		User:    user,
		StartIn: func(start func() error) error { return p.net.do(start) },
	}, nil
}

func randSuffix() string { return strings.ToLower(rand.Text()[:5]) }

// String describes the pod for diagnostics.
func (p *pod) String() string {
	ready, state := p.status()
	p.mu.Lock()
	restarts := p.restarts
	p.mu.Unlock()
	return fmt.Sprintf("%s ready=%t restarts=%d state=%s", p.name, ready, max(restarts-1, 0), state)
}
