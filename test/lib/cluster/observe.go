//go:build linux

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/diagnostics"
)

// What tests read of a running cluster: containers' logs, the tokens
// kubelet projected, core's metrics, diagnostics.

// archiveLogs keeps every container's log after its pod is gone (kubelet
// removes a deleted pod's logs): every second, until ctx ends, it
// hard-links each log file kubelet writes into the archive, which so
// shares what the container writes later too.
func (c *Cluster) archiveLogs(ctx context.Context) {
	for {
		c.linkLogs()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (c *Cluster) linkLogs() {
	for _, n := range c.Nodes {
		files, _ := filepath.Glob(filepath.Join(n.PodLogsDir(), "*", "*", "*.log"))
		for _, f := range files {
			rel, err := filepath.Rel(n.PodLogsDir(), f)
			if err != nil {
				continue
			}
			dst := filepath.Join(c.LogArchive(), rel)
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o750); err == nil {
				_ = os.Link(f, dst)
			}
		}
	}
}

// LogArchive holds every container's log kubelet wrote, also of pods
// deleted since, as <namespace>_<pod>_<uid>/<container>/<restart>.log.
func (c *Cluster) LogArchive() string { return c.path("containers") }

// ContainerLogs returns the log files of every container named name, in
// any pod, also those deleted, oldest first; read them with
// ReadContainerLog.
func (c *Cluster) ContainerLogs(name string) ([]string, error) {
	if c.remote {
		return nil, errors.Wrapf(ErrNotLocal, "cannot read the logs of containers %s, also of deleted pods", name)
	}
	c.linkLogs()
	files, err := filepath.Glob(filepath.Join(c.LogArchive(), "*", name, "*.log"))
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list the logs of containers %s", name)
	}
	sort.Slice(files, func(i, j int) bool { return modTime(files[i]).Before(modTime(files[j])) })
	return files, nil
}

func modTime(p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// ReadContainerLog returns what a container wrote, from a log file kubelet
// keeps in the CRI format ("<time> <stream> <P|F> <text>" lines, a long line
// split into partial ones), as the container wrote it.
func ReadContainerLog(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read a container's log")
	}
	return DecodeCRILog(b), nil
}

// DecodeCRILog turns CRI log lines into the text they hold; a line not in
// the format is kept as it is.
func DecodeCRILog(b []byte) []byte {
	out := bytes.NewBuffer(make([]byte, 0, len(b)))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		f := bytes.SplitN(sc.Bytes(), []byte(" "), 4)
		if len(f) < 3 || (string(f[1]) != "stdout" && string(f[1]) != "stderr") {
			out.Write(sc.Bytes())
			out.WriteByte('\n')
			continue
		}
		if len(f) == 4 {
			out.Write(f[3])
		}
		if string(f[2]) != "P" {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// CoreLog is what Crossplane core's running pod has logged, across its
// container's restarts, oldest first, as core wrote it.
func (c *Cluster) CoreLog(ctx context.Context) ([]byte, error) {
	p, err := c.corePod(ctx)
	if err != nil {
		return nil, err
	}
	if c.remote {
		return c.servedLog(ctx, p, "crossplane")
	}
	n := c.NodeOf(p)
	if n == nil {
		return nil, errors.Errorf("Crossplane core's pod %s runs on no node of the cluster (%q)", p.Name, p.Spec.NodeName)
	}
	dir := filepath.Join(n.PodLogsDir(), p.Namespace+"_"+p.Name+"_"+string(p.UID), "crossplane")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, errors.Wrap(err, "cannot list Crossplane core's logs")
	}
	restarts := make([]int, 0, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") {
			restarts = append(restarts, n)
		}
	}
	sort.Ints(restarts)
	var out []byte
	for _, n := range restarts {
		b, err := ReadContainerLog(filepath.Join(dir, strconv.Itoa(n)+".log"))
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// CoreMetricsURL is where Crossplane core serves its metrics: its pod's
// address.
func (c *Cluster) CoreMetricsURL(ctx context.Context) (string, error) {
	if c.remote {
		return "", errors.Wrap(ErrNotLocal, "cannot reach Crossplane core's pod")
	}
	p, err := c.corePod(ctx)
	if err != nil {
		return "", err
	}
	return "http://" + p.Status.PodIP + ":8080/metrics", nil
}

// CorePID is the PID of Crossplane core's process (its container's
// entrypoint), or 0 when it has none.
func (c *Cluster) CorePID(ctx context.Context) int {
	p, err := c.corePod(ctx)
	if err != nil {
		return 0
	}
	return (&Pod{c: c, pod: p}).ContainerPID("crossplane") //nolint:contextcheck // ContainerPID takes no context: it bounds its own lookup (30s)
}

// corePod is Crossplane core's Running pod.
func (c *Cluster) corePod(ctx context.Context) (*corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := c.Kube.Client.List(ctx, l, client.InNamespace(CrossplaneNamespace), client.MatchingLabels{"app": "crossplane"}); err != nil {
		return nil, errors.Wrap(err, "cannot list Crossplane core's pods")
	}
	for i := range l.Items {
		if p := &l.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p, nil
		}
	}
	return nil, errors.Errorf("Crossplane core has no running pod (%d pods)", len(l.Items))
}

// tokens collects the ServiceAccount tokens kubelet projected into pods.
type tokens struct {
	mu   sync.Mutex
	seen map[string]bool
	all  []string
}

// WatchProjectedTokens starts collecting every ServiceAccount token kubelet
// writes into a projected volume, until ctx ends: ProjectedTokens returns
// them.
func (c *Cluster) WatchProjectedTokens(ctx context.Context) {
	c.collectTokens()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				c.collectTokens()
			}
		}
	}()
}

// ProjectedTokens are the tokens kubelet has projected into pods, those
// written now and those seen since WatchProjectedTokens, oldest first.
func (c *Cluster) ProjectedTokens() []string {
	c.collectTokens()
	c.tokens.mu.Lock()
	defer c.tokens.mu.Unlock()
	return append([]string(nil), c.tokens.all...)
}

func (c *Cluster) collectTokens() {
	var found []string
	for _, n := range c.Nodes {
		_ = filepath.WalkDir(filepath.Join(n.KubeletRootDir(), "pods"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != "token" || !d.Type().IsRegular() || !strings.Contains(p, "kubernetes.io~projected") {
				return nil //nolint:nilerr // volumes come and go
			}
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
				found = append(found, string(b))
			}
			return nil
		})
	}
	c.tokens.mu.Lock()
	defer c.tokens.mu.Unlock()
	if c.tokens.seen == nil {
		c.tokens.seen = map[string]bool{}
	}
	for _, t := range found {
		if !c.tokens.seen[t] {
			c.tokens.seen[t] = true
			c.tokens.all = append(c.tokens.all, t)
		}
	}
}

// LogDirs are the directories holding every log of the cluster: its
// processes', the node's (kubelet, containerd) and every container's (the
// LogArchive). Of a cluster reached by Connect: the run's own logs, and
// the logs the API serves of the pods there are now (written below
// pod-logs).
func (c *Cluster) LogDirs(ctx context.Context) []string {
	if c.remote {
		if err := c.writePodLogs(ctx, c.path("pod-logs")); err != nil {
			c.log.Info("Cannot write every pod's log", "error", err)
		}
		return []string{c.path("logs"), c.path("pod-logs")}
	}
	c.linkLogs()
	return append(append([]string{c.path("logs")}, c.nodeLogDirs()...), c.LogArchive())
}

// DumpDiagnostics writes what is needed to debug a failure into dir
// (default: a new timestamped directory under <Dir>/diagnostics) and
// returns the directory; see diagnostics.Dump.
func (c *Cluster) DumpDiagnostics(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		dir = c.path("diagnostics", time.Now().Format("20060102-150405.000"))
	}
	if c.remote {
		return diagnostics.Dump(ctx, diagnostics.Source{
			Config: c.Kube.Config, Client: c.Kube.Client,
			Pods: c.describePods, Logs: []string{c.path("logs")},
			More: func(write func(string, []byte)) { c.podLogs(ctx, write) },
		}, dir)
	}
	return diagnostics.Dump(ctx, diagnostics.Source{
		Config: c.Kube.Config, Client: c.Kube.Client, Audit: c.Log,
		Pods: c.describePods, Logs: append([]string{c.path("logs")}, c.nodeLogDirs()...),
		More: c.containerLogs,
	}, dir)
}

// containerLogs writes every container's log, as the container wrote it,
// to logs/pod-<pod>-<container>-<restart>.log.
func (c *Cluster) containerLogs(write func(name string, data []byte)) {
	c.linkLogs()
	files, err := filepath.Glob(filepath.Join(c.LogArchive(), "*", "*", "*.log"))
	if err != nil {
		return
	}
	for _, f := range files {
		// <namespace>_<pod>_<uid>/<container>/<restart>.log
		rel, _ := filepath.Rel(c.LogArchive(), f)
		parts := strings.Split(rel, string(filepath.Separator))
		pod := strings.Split(parts[0], "_")
		if len(parts) != 3 || len(pod) != 3 {
			continue
		}
		b, err := ReadContainerLog(f)
		if err != nil {
			continue
		}
		write(filepath.Join("logs", "pod-"+pod[1]+"-"+parts[1]+"-"+parts[2]), b)
	}
}

// describePods lists every pod with its phase, readiness, restarts and
// containers' states.
func (c *Cluster) describePods(ctx context.Context) string {
	l := &corev1.PodList{}
	if err := c.Kube.Client.List(ctx, l); err != nil {
		return "cannot list pods: " + err.Error()
	}
	b := &strings.Builder{}
	for _, p := range l.Items {
		fmt.Fprintf(b, "%s/%s\t%s\tIP %s\n", p.Namespace, p.Name, p.Status.Phase, p.Status.PodIP)
		for _, s := range p.Status.ContainerStatuses {
			state := "waiting"
			switch {
			case s.State.Running != nil:
				state = "running since " + s.State.Running.StartedAt.Format(time.RFC3339)
			case s.State.Terminated != nil:
				state = fmt.Sprintf("terminated (%s, exit %d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
			case s.State.Waiting != nil:
				state = "waiting (" + s.State.Waiting.Reason + ": " + s.State.Waiting.Message + ")"
			}
			fmt.Fprintf(b, "  %s\tready %t\trestarts %d\t%s\n", s.Name, s.Ready, s.RestartCount, state)
		}
	}
	return b.String()
}

// nodeLogDirs are the nodes' own log directories (kubelet's, containerd's).
func (c *Cluster) nodeLogDirs() []string {
	out := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		out = append(out, n.LogsDir())
	}
	return out
}
