package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/test/lib/doccmd"
)

// mark separates the commands' outputs in a block's combined output.
const mark = "\x1edoccmd"

var rcLine = regexp.MustCompile(`^` + mark + ` rc (\d+) (\d+)$`)

// runDocCommands runs every command the user pages mark <!-- demo: run -->
// (package test/lib/doccmd) against the live demo, in page order: each block
// as one bash script (so that a variable or a background process of one
// command serves the next, as in a user's terminal), with KUBECONFIG set,
// kubectl and the Crossplane CLI (as crossplane) first in PATH, from the
// repository root. It fails naming the page and line of a command that
// exits non-zero or whose output disagrees with the page's
// (doccmd.CheckOutput), and kills whatever a block left running.
func runDocCommands(ctx context.Context, t *testing.T, root, kubeconfig, kubectl string) {
	crank := os.Getenv("CRANK_BIN")
	if crank == "" {
		t.Fatal("CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	bin := t.TempDir()
	for name, target := range map[string]string{"kubectl": kubectl, "crossplane": crank} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	blocks, err := doccmd.All(root)
	if err != nil {
		t.Fatal(err)
	}
	ran, skipped := 0, 0
	reasons := map[string]int{}
	for _, b := range blocks {
		if p := b.Problem(); p != "" {
			t.Errorf("%s: %s (go test ./docs/ says so too)", b.Where(), p)
			continue
		}
		if !b.Run {
			skipped += len(b.Commands)
			reasons[b.Skip] += len(b.Commands)
			continue
		}
		ran += runBlock(ctx, t, b, root, env)
	}
	rs := make([]string, 0, len(reasons))
	for r, n := range reasons {
		rs = append(rs, fmt.Sprintf("  %d: %s", n, r))
	}
	slices.Sort(rs)
	t.Logf("the user pages' commands: %d run against the demo, %d skipped, for %d distinct reasons:\n%s", ran, skipped, len(reasons), strings.Join(rs, "\n"))
}

// runBlock runs b's commands and returns how many ran to their end.
func runBlock(ctx context.Context, t *testing.T, b doccmd.Block, root string, env []string) int {
	var script strings.Builder
	script.WriteString("set -o pipefail\nshopt -s expand_aliases\n")
	for i, c := range b.Commands {
		fmt.Fprintf(&script, "%s\n__rc=$?; printf '\\n%s rc %d %%d\\n' \"$__rc\"; [ \"$__rc\" -eq 0 ] || exit \"$__rc\"\n", c.Text, mark, i)
	}
	// A file, not a pipe: a background process a block starts (go run
	// ./function ... &) keeps its output open after bash exits.
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = root, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	runErr := cmd.Run()
	if cmd.Process != nil {
		// What the block left running (its process group, which this test
		// started): the function, a port-forward.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	raw, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	// Split the output per command at the rc lines.
	outputs := make([]string, len(b.Commands))
	done := make([]bool, len(b.Commands))
	var cur []string
	for l := range strings.SplitSeq(string(raw), "\n") {
		m := rcLine.FindStringSubmatch(l)
		if m == nil {
			cur = append(cur, l)
			continue
		}
		i, _ := strconv.Atoi(m[1])
		if i < len(outputs) {
			outputs[i] = strings.Join(cur, "\n")
			done[i] = m[2] == "0"
		}
		cur = nil
	}
	ran := 0
	for i, c := range b.Commands {
		where := fmt.Sprintf("%s:%d", b.Page, c.Line)
		if !done[i] {
			got := outputs[i]
			if got == "" {
				got = strings.Join(cur, "\n")
			}
			t.Errorf("%s: `%s` failed (%v, after %s):\n%s", where, c.Text, runErr, time.Since(start).Round(time.Millisecond), got)
			break
		}
		ran++
		if b.Varies {
			continue
		}
		if err := doccmd.CheckOutput(c.Output, outputs[i]); err != nil {
			t.Errorf("%s: `%s`: %v; it printed:\n%s", where, c.Text, err, outputs[i])
		}
	}
	t.Logf("%s: ran %d of %d commands in %s", b.Where(), ran, len(b.Commands), time.Since(start).Round(time.Millisecond))
	return ran
}
