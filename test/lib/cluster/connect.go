//go:build linux

package cluster

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/audit"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/registry"
)

// ErrNotLocal says a method reaches into the node this package runs:
// its processes, cgroups, kubelet's files or kube-apiserver's audit log.
// A cluster reached by kubeconfig (Connect) has no such node.
var ErrNotLocal = errors.New("needs the node this package starts on this machine (its processes, cgroups, kubelet's files, kube-apiserver's audit log); a cluster reached by kubeconfig has none")

// Remote says how to reach a cluster this package did not start: a kind
// cluster, or a real one.
type Remote struct {
	// Kubeconfig is an admin's kubeconfig of the cluster (its current
	// context).
	Kubeconfig string
	// Registry is the registry (host:port) the cluster's nodes and pods
	// pull images and packages from; this machine pushes to it under the
	// same name. Crossplane pulls packages over plain HTTP only from a
	// registry on loopback or a private (RFC 1918) address.
	Registry string
	// RegistryAuth are the registry's credentials; empty for a registry
	// anyone may push to and pull from.
	RegistryAuth authn.Basic
	// Helm is helm, for InstallCrossplane.
	Helm string
	// Dir holds what the run writes: helm's state, logs, diagnostics.
	Dir string
	Log *slog.Logger
}

// Connect reaches an existing cluster by its kubeconfig. What a Cluster
// does through the API works on it: InstallCrossplane, the package
// methods, pods' logs and diagnostics; what needs this package's own node
// (Local is false) returns ErrNotLocal. Stop leaves the cluster as it is.
func Connect(ctx context.Context, r Remote) (*Cluster, error) {
	switch {
	case r.Kubeconfig == "":
		return nil, errors.New("a cluster to connect to needs a kubeconfig")
	case r.Registry == "":
		return nil, errors.New("a cluster to connect to needs a registry (host:port) that its nodes pull from and this machine pushes to")
	case r.Dir == "" || r.Helm == "":
		return nil, errors.New("cluster options need Dir and Helm")
	}
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", r.Kubeconfig)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read kubeconfig %s", r.Kubeconfig)
	}
	if len(cfg.CAData) == 0 && cfg.CAFile != "" {
		// Whoever checks the cluster's tokens needs its CA's bytes.
		if cfg.CAData, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, errors.Wrapf(err, "cannot read the cluster's CA named in %s", r.Kubeconfig)
		}
		cfg.CAFile = ""
	}
	kc, err := client.New(cfg, client.Options{Scheme: kube.CrossplaneScheme()})
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a client")
	}
	nodes := &corev1.NodeList{}
	if err := kc.List(ctx, nodes); err != nil {
		return nil, errors.Wrapf(err, "cannot list the nodes of the cluster of %s (is it running, and is this an admin's kubeconfig?)", r.Kubeconfig)
	}
	if ready := readyNodes(nodes.Items); len(ready) == 0 {
		return nil, errors.Errorf("the cluster of %s has no Ready node (%d nodes)", r.Kubeconfig, len(nodes.Items))
	}
	for _, d := range []string{r.Dir, filepath.Join(r.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, errors.Wrap(err, "cannot create the run's directories")
		}
	}
	c := &Cluster{
		Kube:       &kube.Env{Config: cfg, Client: kc},
		Registry:   &registry.Registry{Host: r.Registry, Auth: r.RegistryAuth},
		Kubeconfig: r.Kubeconfig,
		// No audit log to read: its methods say so.
		Log:    &audit.Log{},
		opts:   Options{Dir: r.Dir, Tools: Tools{Helm: r.Helm}, Log: r.Log},
		log:    r.Log,
		remote: true,
	}
	r.Log.Info("Connected to an existing cluster", "kubeconfig", r.Kubeconfig, "host", cfg.Host, "nodes", len(nodes.Items), "registry", r.Registry)
	return c, nil
}

// Local is true for a cluster Start started on this machine, false for one
// reached by Connect.
func (c *Cluster) Local() bool { return !c.remote }

func readyNodes(nodes []corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// podLogs writes the log of every container of every pod, and the previous
// instance's of a restarted one, as the API serves them, to
// logs/pod-<pod>-<container>-<restart>.log as for a local cluster. Pods
// deleted before the call are gone: unlike a local cluster's, nothing
// archives their logs.
func (c *Cluster) podLogs(ctx context.Context, write func(name string, data []byte)) {
	cs, err := kubernetes.NewForConfig(c.Kube.Config)
	if err != nil {
		return
	}
	l := &corev1.PodList{}
	if err := c.Kube.Client.List(ctx, l); err != nil {
		return
	}
	for _, p := range l.Items {
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			base := strings.Join([]string{"pod", p.Name, s.Name}, "-")
			if b, err := podLog(ctx, cs, p, s.Name, false); err == nil {
				write(filepath.Join("logs", base+"-"+itoa(s.RestartCount)+".log"), b)
			}
			if s.RestartCount > 0 {
				if b, err := podLog(ctx, cs, p, s.Name, true); err == nil {
					write(filepath.Join("logs", base+"-"+itoa(s.RestartCount-1)+".log"), b)
				}
			}
		}
	}
}

func podLog(ctx context.Context, cs kubernetes.Interface, p corev1.Pod, container string, previous bool) ([]byte, error) {
	rc, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: previous}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close() //nolint:errcheck // read only
	return io.ReadAll(rc)
}

// servedLog is what the pod's container has logged, as the API serves it: the
// previous instance's (of a restarted container), then the current one's.
// The API keeps one previous instance; a local cluster's log has them all.
func (c *Cluster) servedLog(ctx context.Context, p *corev1.Pod, container string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(c.Kube.Config)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a client")
	}
	var out []byte
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.RestartCount > 0 {
			b, err := podLog(ctx, cs, *p, container, true)
			if err != nil {
				return nil, errors.Wrapf(err, "cannot read the log of pod %s's previous container %s", p.Name, container)
			}
			out = b
		}
	}
	b, err := podLog(ctx, cs, *p, container, false)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read the log of pod %s's container %s", p.Name, container)
	}
	return append(out, b...), nil
}

// writePodLogs writes every pod's log (podLogs) below dir.
func (c *Cluster) writePodLogs(ctx context.Context, dir string) error {
	var errs []error
	c.podLogs(ctx, func(name string, data []byte) {
		p := filepath.Join(dir, filepath.Base(name))
		errs = append(errs, os.MkdirAll(dir, 0o750), os.WriteFile(p, data, 0o600))
	})
	return errors.Wrap(errors.Join(errs...), "cannot write the pods' logs")
}
