package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// Where a kubelet mounts a pod's ServiceAccount token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// tokenSeconds is how long the ServiceAccount tokens the node requests last.
// A kubelet requests one-hour tokens and refreshes them; the harness's runs
// are shorter than this, so it requests once per container start.
const tokenSeconds = 12 * 60 * 60

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
}

// A pod is one replica of a Deployment: a sandbox (network and UTS
// namespaces, a root filesystem built from the image, volumes, a
// ServiceAccount token) and one container process the node keeps running.
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
	return &pod{
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

// status reports whether the container is ready, and its state.
func (p *pod) status() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready, p.state
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
}

// stop kills the container (SIGTERM, then SIGKILL after the grace period)
// and removes the sandbox.
func (p *pod) stop() error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	var err error
	if pr := p.process(); pr != nil {
		err = pr.Stop()
	}
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
	return err
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
	cmd, err := p.command(ctx, c)
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

// command builds the container's process: the image's root with the pod's
// volumes, its entrypoint and arguments, its environment, its user.
func (p *pod) command(ctx context.Context, c corev1.Container) (proc.Command, error) {
	img, err := p.env.images.get(ctx, c.Image)
	if err != nil {
		return proc.Command{}, errors.Wrap(err, "ImagePullBackOff")
	}
	// A pod's volumes (and, here, its root) outlive its containers: a
	// restarted container finds them as they were, even while the API server
	// is away.
	root := filepath.Join(p.dir, "root")
	if !p.rootReady {
		if err := p.makeRoot(ctx, root, img, c); err != nil {
			return proc.Command{}, err
		}
		p.rootReady = true
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

// makeRoot builds the container's root from the image and mounts the
// pod's volumes into it.
func (p *pod) makeRoot(ctx context.Context, root string, img *image, c corev1.Container) error {
	if err := os.RemoveAll(root); err != nil {
		return errors.Wrap(err, "cannot clear the container root")
	}
	if err := linkTree(img.rootfs, root); err != nil {
		return errors.Wrap(err, "cannot create the container root from the image")
	}
	if err := p.basics(root); err != nil {
		return err
	}
	return p.volumes(ctx, root, c)
}

// basics writes what a container runtime puts in every container.
func (p *pod) basics(root string) error {
	for _, d := range []string{"etc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil { //nolint:gosec // As in a container.
			return errors.Wrap(err, "cannot create the container's directories")
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		return errors.Wrap(err, "cannot make the container's /tmp writable")
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.0.1\t" + p.name + "\n"
	for f, data := range map[string]string{"etc/hosts": hosts, "etc/hostname": p.name + "\n"} {
		dst := filepath.Join(root, f)
		_ = os.Remove(dst)
		if err := os.WriteFile(dst, []byte(data), 0o644); err != nil { //nolint:gosec // World-readable, as in a container.
			return errors.Wrapf(err, "cannot write the container's /%s", f)
		}
	}
	null := filepath.Join(root, "dev", "null")
	_ = os.Remove(null)
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		return errors.Wrap(err, "cannot create the container's /dev/null")
	}
	return errors.Wrap(os.Chmod(null, 0o666), "cannot create the container's /dev/null") //nolint:gosec // /dev/null is world-writable.
}

// volumes writes the container's volume mounts and its ServiceAccount token
// into root. Files are owned by root and world-readable, as a kubelet writes
// Secret and ConfigMap volumes without an fsGroup.
func (p *pod) volumes(ctx context.Context, root string, c corev1.Container) error {
	byName := map[string]corev1.Volume{}
	for _, v := range p.spec.Volumes {
		byName[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := byName[m.Name]
		if !ok {
			return errors.Errorf("CreateContainerConfigError: volume mount %q names no volume", m.Name)
		}
		files, err := p.volumeFiles(ctx, v)
		if err != nil {
			return err
		}
		dir := filepath.Join(root, filepath.FromSlash(m.MountPath))
		if err := writeVolume(dir, files, v.EmptyDir != nil); err != nil {
			return errors.Wrapf(err, "cannot mount volume %s at %s", v.Name, m.MountPath)
		}
	}
	if !ptr.Deref(p.spec.AutomountServiceAccountToken, true) {
		return nil
	}
	sa := p.spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenSeconds)}}
	acct := &corev1.ServiceAccount{}
	acct.SetNamespace(p.env.namespace)
	acct.SetName(sa)
	if err := p.env.kube.SubResource("token").Create(ctx, acct, tr); err != nil {
		return errors.Wrapf(err, "CreateContainerConfigError: cannot request a token for ServiceAccount %s/%s", p.env.namespace, sa)
	}
	files := map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": p.env.apiCA, "namespace": []byte(p.env.namespace)}
	return errors.Wrap(writeVolume(filepath.Join(root, serviceAccountDir), files, false), "cannot mount the ServiceAccount token")
}

// volumeFiles returns the files of a Secret, ConfigMap or emptyDir volume.
func (p *pod) volumeFiles(ctx context.Context, v corev1.Volume) (map[string][]byte, error) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: p.env.namespace, Name: n} }
	switch {
	case v.Secret != nil:
		s := &corev1.Secret{}
		if err := p.env.kube.Get(ctx, key(v.Secret.SecretName), s); err != nil {
			return nil, errors.Wrapf(err, "CreateContainerConfigError: cannot get Secret %s for volume %s", v.Secret.SecretName, v.Name)
		}
		return pick(s.Data, v.Secret.Items, v.Name)
	case v.ConfigMap != nil:
		cm := &corev1.ConfigMap{}
		if err := p.env.kube.Get(ctx, key(v.ConfigMap.Name), cm); err != nil {
			return nil, errors.Wrapf(err, "CreateContainerConfigError: cannot get ConfigMap %s for volume %s", v.ConfigMap.Name, v.Name)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		for k, b := range cm.BinaryData {
			data[k] = b
		}
		return pick(data, v.ConfigMap.Items, v.Name)
	case v.EmptyDir != nil:
		return nil, nil
	}
	return nil, errors.Errorf("CreateContainerConfigError: volume %s: the harness's node mounts only Secret, ConfigMap and emptyDir volumes", v.Name)
}

// pick returns data's files, or only the listed items (key to path).
func pick(data map[string][]byte, items []corev1.KeyToPath, vol string) (map[string][]byte, error) {
	if len(items) == 0 {
		return data, nil
	}
	out := map[string][]byte{}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, errors.Errorf("CreateContainerConfigError: volume %s: key %q does not exist", vol, it.Key)
		}
		out[it.Path] = b
	}
	return out, nil
}

// writeVolume writes files into dir. An emptyDir is world-writable.
func writeVolume(dir string, files map[string][]byte, empty bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
		return err
	}
	if empty {
		return os.Chmod(dir, 0o777|os.ModeSticky)
	}
	for name, data := range files {
		rel := filepath.Clean("/" + name)
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil { //nolint:gosec // Secret volumes default to 0644.
			return err
		}
	}
	return nil
}

// environment is the container's environment: the image's, what a kubelet
// adds (HOSTNAME, the kubernetes Service), then the container's env in
// order, with $(VAR) references and downward API fields resolved.
func (p *pod) environment(ctx context.Context, c corev1.Container, img *image) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range img.config.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	set("HOSTNAME", p.name)
	set("KUBERNETES_SERVICE_HOST", p.env.apiHost)
	set("KUBERNETES_SERVICE_PORT", p.env.apiPort)
	set("KUBERNETES_SERVICE_PORT_HTTPS", p.env.apiPort)
	set("KUBERNETES_PORT", "tcp://"+net.JoinHostPort(p.env.apiHost, p.env.apiPort))
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("CreateContainerConfigError: the harness's node does not support envFrom")
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expandOne(e.Value, vars))
			continue
		}
		v, err := p.valueFrom(ctx, e)
		if err != nil {
			return nil, err
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

var labelPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

func (p *pod) valueFrom(ctx context.Context, e corev1.EnvVar) (string, error) {
	vf := e.ValueFrom
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: p.env.namespace, Name: n} }
	switch {
	case vf.FieldRef != nil:
		f := vf.FieldRef.FieldPath
		switch f {
		case "metadata.name":
			return p.name, nil
		case "metadata.namespace":
			return p.env.namespace, nil
		case "spec.serviceAccountName":
			return p.spec.ServiceAccountName, nil
		case "spec.nodeName":
			return "harness", nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", nil
		}
		if m := labelPath.FindStringSubmatch(f); m != nil && m[1] == "labels" {
			return p.labels[m[2]], nil
		}
		return "", errors.Errorf("CreateContainerConfigError: env %s: the harness's node does not support field %s", e.Name, f)
	case vf.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := p.env.kube.Get(ctx, key(vf.SecretKeyRef.Name), s); err != nil {
			return "", errors.Wrapf(err, "CreateContainerConfigError: env %s: cannot get Secret %s", e.Name, vf.SecretKeyRef.Name)
		}
		return string(s.Data[vf.SecretKeyRef.Key]), nil
	case vf.ConfigMapKeyRef != nil:
		cm := &corev1.ConfigMap{}
		if err := p.env.kube.Get(ctx, key(vf.ConfigMapKeyRef.Name), cm); err != nil {
			return "", errors.Wrapf(err, "CreateContainerConfigError: env %s: cannot get ConfigMap %s", e.Name, vf.ConfigMapKeyRef.Name)
		}
		return cm.Data[vf.ConfigMapKeyRef.Key], nil
	}
	return "", errors.Errorf("CreateContainerConfigError: env %s: unsupported valueFrom", e.Name)
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expandOne resolves $(VAR) as Kubernetes does: known variables expand,
// unknown ones stay as written, $$ escapes.
func expandOne(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func expand(in []string, vars map[string]string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, expandOne(s, vars))
	}
	return out
}

// runAs resolves the container's user as a kubelet does: the container's
// securityContext, then the pod's, then the image's numeric USER. It refuses
// root when runAsNonRoot is set.
func runAs(pod *corev1.PodSecurityContext, c *corev1.SecurityContext, imageUser string) (*proc.User, error) {
	var uid, gid *int64
	nonRoot := false
	if pod != nil {
		uid, gid, nonRoot = pod.RunAsUser, pod.RunAsGroup, ptr.Deref(pod.RunAsNonRoot, false)
	}
	if c != nil {
		if c.RunAsUser != nil {
			uid = c.RunAsUser
		}
		if c.RunAsGroup != nil {
			gid = c.RunAsGroup
		}
		if c.RunAsNonRoot != nil {
			nonRoot = *c.RunAsNonRoot
		}
	}
	if uid == nil || gid == nil {
		u, g, _ := strings.Cut(imageUser, ":")
		if uid == nil {
			n, err := strconv.ParseInt(u, 10, 64)
			if err != nil && u != "" {
				return nil, errors.Errorf("CreateContainerConfigError: image user %q is not numeric and the pod sets no runAsUser", imageUser)
			}
			uid = &n
		}
		if gid == nil {
			n, _ := strconv.ParseInt(g, 10, 64)
			gid = &n
		}
	}
	if nonRoot && *uid == 0 {
		return nil, errors.New("CreateContainerConfigError: container has runAsNonRoot and image will run as root")
	}
	return &proc.User{UID: uint32(*uid), GID: uint32(*gid)}, nil //nolint:gosec // IDs are small.
}

// probe runs the container's probes until it exits (or ctx ends): the
// readiness probe sets the pod's readiness; a failing liveness probe kills
// the container, which then restarts.
func (p *pod) probe(ctx context.Context, c corev1.Container, pr *proc.Process) error {
	exited := pr.Exited()
	ready := newProber(p, c, c.ReadinessProbe, false)
	live := newProber(p, c, c.LivenessProbe, true)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.Errorf("container exited (%v): %s", pr.Err(), tailFile(pr.LogPath(), 3))
		case <-tick.C:
		}
		up := time.Since(start)
		if ready != nil {
			if ok, changed := ready.run(ctx, up); changed {
				p.setState(ok, "Running")
			}
		}
		if live != nil {
			if ok, changed := live.run(ctx, up); changed && !ok {
				p.log.Info("Liveness probe failed; killing the container", "reason", live.last)
				_ = pr.Stop()
				return errors.Errorf("liveness probe failed: %v", live.last)
			}
		}
	}
}

// A prober runs one probe with its timing: first after
// initialDelaySeconds, then every periodSeconds (default 10); the result
// flips after failureThreshold failures (default 3) or successThreshold
// successes (default 1). A readiness probe starts out failing, a liveness
// probe succeeding. Until its first success a probe runs every second (a
// kubelet would wait periodSeconds), so installs do not idle for a period.
type prober struct {
	p     *pod
	c     corev1.Container
	probe *corev1.Probe

	next                time.Duration
	ok, succeeded       bool
	successes, failures int32
	last                error
}

func newProber(p *pod, c corev1.Container, pr *corev1.Probe, initial bool) *prober {
	if pr == nil {
		return nil
	}
	return &prober{p: p, c: c, probe: pr, next: time.Duration(pr.InitialDelaySeconds) * time.Second, ok: initial}
}

// run probes if it is time; it returns the probe's result and whether that
// changed.
func (r *prober) run(ctx context.Context, up time.Duration) (ok, changed bool) {
	if up < r.next {
		return r.ok, false
	}
	period := 10 * time.Second
	if r.probe.PeriodSeconds > 0 {
		period = time.Duration(r.probe.PeriodSeconds) * time.Second
	}
	if !r.succeeded {
		period = time.Second
	}
	r.next = up + period
	timeout := time.Duration(max(r.probe.TimeoutSeconds, 1)) * time.Second
	pctx, cancel := context.WithTimeout(ctx, timeout)
	r.last = r.check(pctx)
	cancel()
	if r.last == nil {
		r.succeeded = true
		r.successes, r.failures = r.successes+1, 0
	} else {
		r.successes, r.failures = 0, r.failures+1
	}
	failureThreshold := r.probe.FailureThreshold
	if failureThreshold <= 0 {
		failureThreshold = 3
	}
	switch {
	case !r.ok && r.successes >= max(r.probe.SuccessThreshold, 1):
		r.ok = true
		return true, true
	case r.ok && r.failures >= failureThreshold:
		r.ok = false
		return false, true
	}
	return r.ok, false
}

func (r *prober) check(ctx context.Context) error {
	h := r.probe.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		port, err := containerPort(r.c, h.HTTPGet.Port)
		if err != nil {
			return err
		}
		if h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			return errors.New("the harness's node probes only over HTTP")
		}
		hc := &http.Client{Transport: &http.Transport{DialContext: r.p.dial, DisableKeepAlives: true}}
		u := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + h.HTTPGet.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		rsp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(rsp.Body, 1<<16))
		_ = rsp.Body.Close()
		if rsp.StatusCode < 200 || rsp.StatusCode >= 400 {
			return errors.Errorf("HTTP probe %s answered %d", h.HTTPGet.Path, rsp.StatusCode)
		}
		return nil
	case h.TCPSocket != nil:
		port, err := containerPort(r.c, h.TCPSocket.Port)
		if err != nil {
			return err
		}
		c, err := r.p.dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return c.Close()
	}
	return errors.New("the harness's node runs only httpGet and tcpSocket probes")
}

// containerPort resolves a probe's or Service's port: a number, or the
// name of one of the container's ports.
func containerPort(c corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, errors.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

// forward accepts connections on l and pipes each to what dial returns,
// until l is closed.
func forward(l net.Listener, dial func(ctx context.Context) (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := dial(ctx)
			cancel()
			if err != nil {
				_ = in.Close()
				return
			}
			pipe(in, out)
		}()
	}
}

// pipe copies both ways until either side is done, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	_ = a.Close()
	_ = b.Close()
}

// linkTree recreates src's directories at dst and hard-links its files, so
// every container of an image starts from the image's files without copying
// them; they stay owned by the image's owners, so a non-root container
// cannot change them.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			if st != nil {
				if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
			return os.Chmod(to, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid))
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		default:
			return os.Link(path, to)
		}
	})
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
