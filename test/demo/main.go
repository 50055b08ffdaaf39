// Command demo is `make demo`: it starts a real one-node Kubernetes cluster
// on this machine (package test/lib/cluster: kube-apiserver, kubelet,
// containerd, CoreDNS), installs Crossplane from its Helm chart, publishes
// the three packages to the cluster's private registry, installs
// configuration-widget (the XWidget API), which makes Crossplane install
// provider-widget and function-widget as pods, points the provider at a
// local Widget API, applies the example XWidget and WidgetClaim, and shows
// them going Ready. It then prints what to try and stays up until Ctrl-C,
// which tears everything down.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/node"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/widgetserver"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// The demo's Widget API credentials. They exist only on this machine, for
// as long as the demo runs.
const (
	demoToken   = "demo-token"
	demoProject = "demo"
)

type cli struct {
	Dir           string        `default:"_output/demo" help:"Directory for the cluster's state and logs (relative to the repository root; short: unix socket paths under it are limited to 107 bytes). A previous demo's directory is replaced."`
	Timeout       time.Duration `default:"5m" help:"How long to wait for the XWidget and the claim to be Ready before writing diagnostics."`
	ExitWhenReady bool          `help:"Tear down and exit once both are Ready (a smoke test of the demo), or fail after --timeout."`
	Debug         bool          `help:"Run provider-widget with --debug (kubectl logs shows it)."`
	ClusterOnly   bool          `help:"Start the cluster and its registry only, write <dir>/e2e.env for running the e2e suite against it as a cluster of your own (make e2e-cluster), and stay up until Ctrl-C."`
}

func main() {
	c := &cli{}
	kong.Parse(c,
		kong.Name("demo"),
		kong.Description("Run provider-widget and function-widget on Crossplane in a one-node Kubernetes cluster on this machine (as root) with an example XWidget and WidgetClaim. Ctrl-C tears it all down."),
		kong.UsageOnError())
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(c *cli) error { // A linear sequence of steps.
	root, err := platform.FindRoot()
	if err != nil {
		return err
	}
	if err := node.Check(); err != nil {
		return errors.Errorf("the demo runs a real one-node Kubernetes cluster on this machine, and %v", err)
	}
	tools, err := cluster.ToolsFromEnv()
	if err != nil {
		return errors.Wrap(err, "make demo builds the tools first")
	}
	crossplane, crank := os.Getenv("CROSSPLANE_BIN"), os.Getenv("CRANK_BIN")
	if crossplane == "" || crank == "" {
		return errors.New("CROSSPLANE_BIN or CRANK_BIN is unset: run make demo, which builds and names them")
	}
	dir := c.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	if err := claimDir(dir); err != nil {
		return err
	}
	log := slog.New(progressHandler{mu: &sync.Mutex{}, w: os.Stdout})
	// The API server's deprecation warnings about Crossplane's own kinds
	// (read when writing diagnostics) are noise here.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})

	pkgs, err := platform.FindPackages(root)
	if err != nil {
		return errors.Wrap(err, "cannot find the packages (make demo builds them)")
	}
	// Everything below ends at Ctrl-C, which tears the cluster down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			say("Interrupted; the cluster is torn down.")
			return nil
		}
		return err
	}

	say("Starting a one-node Kubernetes cluster in %s: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet on containerd, kube-proxy, CoreDNS ...", rel(root, dir))
	cl, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log})
	if err != nil {
		return interrupted(err)
	}
	defer func() {
		if err := cl.Stop(); err != nil {
			say("Could not tear everything down: %v", err)
		}
	}()
	if c.ClusterOnly {
		return interrupted(serveClusterOnly(ctx, cl, root, dir))
	}
	say("Installing Crossplane v2.4.2 from its Helm chart, with the flag docs/install.md recommends ...")
	if _, err := cl.InstallCrossplane(ctx, cluster.Crossplane{Bin: crossplane, Version: "v2.4.2", Args: platform.CoreArgs()}); err != nil {
		return interrupted(err)
	}
	api, err := widgetserver.Start(server.Options{
		Tokens:         map[string]string{demoToken: demoProject},
		ProvisionDelay: 3 * time.Second,
		ResizeDelay:    3 * time.Second,
		DeleteDelay:    2 * time.Second,
	}, dir, net.JoinHostPort(cl.NodeIP(), "0"))
	if err != nil {
		return err
	}
	defer api.Close() //nolint:errcheck // the demo exits either way

	var provArgs []string
	if c.Debug {
		provArgs = append(provArgs, "--debug")
	}
	say("Publishing provider-widget, function-widget and configuration-widget %s to the cluster's registry %s, then installing only the Configuration: Crossplane's package manager resolves and installs the provider and the function ...", pkgs.Version, platform.Registry(cl))
	if err := platform.Install(ctx, cl, api.URL, platform.Options{
		Root: root, Packages: pkgs, Crank: crank, Token: demoToken, ProviderArgs: provArgs, Log: log,
	}); err != nil {
		return interrupted(err)
	}
	say("Installed Configuration %s; Crossplane installed its dependencies as Provider %s and Function %s, whose pods kubelet runs.",
		platform.ConfigurationName, platform.ProviderName, platform.FunctionName)
	objs, err := applyExamples(ctx, cl.Client(), root)
	if err != nil {
		return interrupted(err)
	}
	say("Applied the example XWidget %s and WidgetClaim %s. Waiting for them to be Ready ...", platform.Name(objs[0]), platform.Name(objs[1]))

	w := newWatcher(cl.Client(), dir, objs)
	readyIn, err := w.untilReady(ctx, c.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(err)
		}
		w.explain(ctx, err)
		if c.ExitWhenReady {
			return errors.New("the example XWidget and WidgetClaim did not become Ready")
		}
		say("The cluster stays up so you can look around (export KUBECONFIG=%s). Press Ctrl-C to stop.", cl.Kubeconfig)
		<-ctx.Done()
		return errors.New("the example XWidget and WidgetClaim did not become Ready")
	}
	metrics, err := metricsEndpoints(ctx, cl.Client())
	if err != nil {
		return err
	}
	if err := printTryThis(cl.Kubeconfig, api.URL, objs, readyIn, rel(root, dir), crank, metrics); err != nil {
		return err
	}
	if c.ExitWhenReady {
		return nil
	}
	w.follow(ctx)
	<-ctx.Done()
	say("Stopping; the cluster is torn down. Logs are kept in %s.", filepath.Join(rel(root, dir), "logs"))
	return nil
}

// claimDir makes dir the demo's, replacing a previous demo's directory,
// unless a demo that is still running uses it.
func claimDir(dir string) error {
	pidFile := filepath.Join(dir, "demo.pid")
	b, err := os.ReadFile(pidFile)
	switch {
	case err == nil:
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			return errors.Errorf("another demo (pid %d) is using %s: stop it with Ctrl-C, or pass --dir", pid, dir)
		}
	case os.IsNotExist(err):
		// Never remove a directory that is not a demo's.
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			return errors.Errorf("%s is not empty and not a previous demo's directory: pass another --dir", dir)
		}
	default:
		return errors.Wrap(err, "cannot read the demo's pid file")
	}
	if err := node.RemoveDir(dir); err != nil {
		return errors.Wrap(err, "cannot remove the previous demo's directory")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return errors.Wrap(err, "cannot create the demo's directory")
	}
	return errors.Wrap(os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o600), "cannot write the demo's pid file")
}

// say prints a line for the person running the demo.
func say(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

// rel shortens path to be relative to root where it is inside it.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// progressHandler prints the cluster's progress as indented lines without
// timestamps: "  kube-apiserver ready duration=3.9s url=...".
type progressHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	attrs []slog.Attr
}

func (h progressHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h progressHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("  " + r.Message)
	write := func(a slog.Attr) bool {
		if v := a.Value.String(); v != "" {
			b.WriteString(" " + a.Key + "=" + v)
		}
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h progressHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.attrs = append(slices.Clone(h.attrs), attrs...)
	return h
}

func (h progressHandler) WithGroup(string) slog.Handler { return h }

// serveClusterOnly writes e2e.env, which points the e2e suite at the
// cluster as at a cluster of the user's own, and waits for Ctrl-C.
func serveClusterOnly(ctx context.Context, cl *cluster.Cluster, root, dir string) error {
	env := filepath.Join(dir, "e2e.env")
	lines := []string{
		"E2E_KUBECONFIG=" + cl.Kubeconfig,
		"E2E_REGISTRY=" + cl.Registry.Host,
		"E2E_REGISTRY_USERNAME=" + cl.Registry.Auth.Username,
		"E2E_REGISTRY_PASSWORD=" + cl.Registry.Auth.Password,
		"E2E_WIDGET_API_ADDR=" + cl.NodeIP(),
	}
	if err := os.WriteFile(env, []byte("export "+strings.Join(lines, "\nexport ")+"\n"), 0o600); err != nil {
		return errors.Wrap(err, "cannot write the e2e suite's settings")
	}
	say("The cluster is up, without Crossplane. Run the e2e suite against it from another shell: source %s && make e2e-cluster. Press Ctrl-C to stop.", rel(root, env))
	<-ctx.Done()
	return ctx.Err()
}
