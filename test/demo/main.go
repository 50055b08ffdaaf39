// Command demo is `make demo`: it starts a local Crossplane control plane
// (package harness), publishes the three packages to a loopback registry,
// installs configuration-widget (the XWidget API), which makes Crossplane
// install provider-widget and function-widget, points the provider at a
// local Widget API, applies the example XWidget and WidgetClaim, and shows
// them going Ready. It then prints what to try and stays up until Ctrl-C, which
// tears everything down.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
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

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// The demo's Widget API credentials. They exist only on this machine, for
// as long as the demo runs.
const (
	demoToken   = "demo-token"
	demoProject = "demo"
)

type cli struct {
	Dir           string        `default:"_output/demo" help:"Directory for the control plane's state, logs and diagnostics (relative to the repository root). A previous demo's directory is replaced."`
	Timeout       time.Duration `default:"5m" help:"How long to wait for the XWidget and the claim to be Ready before writing diagnostics."`
	ExitWhenReady bool          `help:"Tear down and exit once both are Ready (a smoke test of the demo), or fail after --timeout."`
	Debug         bool          `help:"Run Crossplane core and provider-widget with --debug (their logs are in <dir>/logs)."`
}

func main() {
	c := &cli{}
	kong.Parse(c,
		kong.Name("demo"),
		kong.Description("Run provider-widget and function-widget on a local Crossplane control plane with an example XWidget and WidgetClaim. Ctrl-C tears it all down."),
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
	tools, err := harness.ToolsFromEnv()
	if err != nil {
		return err
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

	say("Starting a local control plane in %s ...", rel(root, dir))
	var provArgs []string
	if c.Debug {
		provArgs = append(provArgs, "--debug")
	}
	h, err := harness.Start(context.Background(), harness.Options{
		Dir:           dir,
		Log:           log,
		Tools:         &tools,
		Debug:         c.Debug,
		HandleSignals: true,
		// As docs/install.md recommends.
		CoreArgs: platform.CoreArgs(),
		WidgetAPI: &server.Options{
			Tokens:         map[string]string{demoToken: demoProject},
			ProvisionDelay: 3 * time.Second,
			ResizeDelay:    3 * time.Second,
			DeleteDelay:    2 * time.Second,
		},
	})
	if err != nil {
		return err
	}
	defer h.Stop() //nolint:errcheck // Stop reports problems in its log; the demo exits either way.
	// Everything below ends when the harness is torn down (Ctrl-C).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			say("Interrupted; the control plane is torn down.")
			return nil
		}
		return err
	}

	say("Publishing provider-widget, function-widget and configuration-widget %s to the loopback registry %s, then installing only the Configuration: Crossplane's package manager resolves and installs the provider and the function ...", pkgs.Version, platform.Registry(h))
	p, err := platform.Install(ctx, h, platform.Options{
		Root: root, Packages: pkgs, Crank: tools.Crank, Token: demoToken, ProviderArgs: provArgs, Log: log,
	})
	if err != nil {
		return interrupted(err)
	}
	say("Installed Configuration %s; Crossplane installed its dependencies as Provider %s and Function %s (%d and %d pods).",
		p.Configuration, platform.ProviderName, platform.FunctionName, len(p.Provider.Pods()), len(p.Function.Pods()))
	objs, err := applyExamples(ctx, h, root)
	if err != nil {
		return interrupted(err)
	}
	say("Applied the example XWidget %s and WidgetClaim %s. Waiting for them to be Ready ...", platform.Name(objs[0]), platform.Name(objs[1]))

	w := newWatcher(h, objs)
	readyIn, err := w.untilReady(ctx, c.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(err)
		}
		w.explain(ctx, err)
		if c.ExitWhenReady {
			return errors.New("the example XWidget and WidgetClaim did not become Ready")
		}
		say("The control plane stays up so you can look around (export KUBECONFIG=%s). Press Ctrl-C to stop.", h.Kubeconfig())
		<-h.Done()
		return errors.New("the example XWidget and WidgetClaim did not become Ready")
	}
	metrics, err := forwardMetrics(p)
	if err != nil {
		return err
	}
	if err := printTryThis(h, objs, readyIn, rel(root, dir), tools.Crank, metrics); err != nil {
		return err
	}
	if c.ExitWhenReady {
		return nil
	}
	w.follow(ctx)
	<-h.Done()
	say("Stopped; the control plane is torn down. Logs are kept in %s.", filepath.Join(rel(root, dir), "logs"))
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
	if err := harness.RemoveDir(dir); err != nil {
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

// progressHandler prints the harness's progress as indented lines without
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
