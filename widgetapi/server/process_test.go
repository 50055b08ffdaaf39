package server_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// buildServer compiles the widget-api binary once per test run.
func buildServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the widget-api binary")
	}
	bin, err := proc.Build(t.Context(), "github.com/widgetco/crossplane-widget/widgetapi/cmd/widget-api")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	a, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runServer starts the binary and waits until it serves.
func runServer(t *testing.T, bin, dataDir, tokens, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, "--listen", addr, "--data-dir", dataDir, "--tokens-file", tokens, "--provision-delay", "1h")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "serving the Widget API") {
				close(ready)
				once = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("widget-api did not start")
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestKill9Durability kills the real server with SIGKILL right after a burst
// of acknowledged writes and checks every one of them is there on restart.
func TestKill9Durability(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := writeFile(tokens, "secret-token-1 proj\n"); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := runServer(t, bin, filepath.Join(dir, "data"), tokens, addr)
	c, err := widgetapi.New("http://"+addr, widgetapi.WithToken("secret-token-1"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 25
	acked := map[string]int64{}
	for i := range n {
		w, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: fmt.Sprintf("k9-%02d", i), Description: "acknowledged"})
		if err != nil {
			t.Fatal(err)
		}
		acked[w.Name] = w.Generation
	}
	if _, err := c.PatchWidget(ctx(t), "k9-00", widgetapi.PatchWidgetRequest{Size: ptr("large")}); err != nil {
		t.Fatal(err)
	}
	head, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: widgetapi.FromLatest})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	runServer(t, bin, filepath.Join(dir, "data"), tokens, addr)
	for name := range acked {
		w, err := c.GetWidget(ctx(t), name)
		if err != nil {
			t.Errorf("acknowledged widget %s lost after kill -9: %v", name, err)
			continue
		}
		if name == "k9-00" && (w.Size != "large" || w.Generation != 2) {
			t.Errorf("acknowledged update lost after kill -9: size %s generation %d", w.Size, w.Generation)
		}
	}
	after, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: widgetapi.FromLatest})
	if err != nil {
		t.Fatal(err)
	}
	if after.LatestSeq != head.LatestSeq {
		t.Errorf("feed sequence after kill -9: %d, want %d", after.LatestSeq, head.LatestSeq)
	}
}

// TestGracefulShutdown checks SIGTERM drains and exits 0.
func TestGracefulShutdown(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := writeFile(tokens, "tok proj\n"); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := runServer(t, bin, filepath.Join(dir, "data"), tokens, addr)
	c, _ := widgetapi.New("http://"+addr, widgetapi.WithToken("tok"))
	poll := make(chan error, 1)
	go func() {
		_, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: 0, Wait: time.Minute})
		poll <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("widget-api exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("widget-api did not exit after SIGTERM")
	}
	if err := <-poll; err != nil {
		t.Errorf("long poll during shutdown: %v, want an orderly (empty) answer", err)
	}
}
