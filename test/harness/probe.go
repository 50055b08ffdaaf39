package harness

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

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
