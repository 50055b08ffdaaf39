package harness

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSignalTeardown runs a harness (with a function installed) in a child
// process the way `make demo` does, interrupts it with SIGINT, and checks
// that every process it started has exited and no port it listened on is
// still open.
func TestSignalTeardown(t *testing.T) {
	integrationTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := keptDir(t)
	readyFile := filepath.Join(dir, "ready.json")

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperSignalHarness$", "-test.v")
	cmd.Env = append(os.Environ(), "HARNESS_HELPER=1", "HARNESS_HELPER_DIR="+dir, "HARNESS_HELPER_READY="+readyFile)
	out, err := os.Create(filepath.Join(dir, "helper.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	eventually(ctx, t, "helper harness ready", func(context.Context) error {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
			t.Fatalf("helper exited early (%v):\n%s", err, b)
		default:
		}
		_, err := os.Stat(readyFile)
		return err
	})
	procs := descendants(cmd.Process.Pid)
	socks := listeners(procs)
	t.Logf("Helper's processes: %v", procs)
	t.Logf("Helper's listening sockets: %v", socks)
	var listening []string
	for _, addrs := range socks {
		listening = append(listening, addrs...)
	}
	for _, want := range []string{"etcd", "kube-apiserver", "crossplane", "function-auto-"} {
		if !hasProc(procs, want) {
			t.Errorf("no %q among the helper's processes %v", want, procs)
		}
	}

	ts := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("helper exited with %v after SIGINT; want a clean exit", err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("helper did not exit within %s of SIGINT", waitTimeout)
	}
	t.Logf("TIMINGS: teardown on SIGINT %s", time.Since(ts).Round(100*time.Millisecond))
	for pid, name := range procs {
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running after SIGINT teardown", name, pid)
		}
	}
	open := listeningAddrs()
	for _, a := range listening {
		if open[a] {
			t.Errorf("%s is still listening after SIGINT teardown", a)
		}
	}
	if t.Failed() {
		b, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
		t.Logf("helper log:\n%s", b)
	}
}

// TestHelperSignalHarness is not a test: TestSignalTeardown runs it in a
// child process, where it starts a harness that handles SIGINT, installs
// function-auto-ready, writes the ready file and waits for the teardown.
func TestHelperSignalHarness(t *testing.T) {
	if os.Getenv("HARNESS_HELPER") != "1" {
		t.Skip("helper process for TestSignalTeardown")
	}
	tools := integrationTools(t)
	dir := os.Getenv("HARNESS_HELPER_DIR")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx := context.Background()
	h, err := Start(ctx, Options{Dir: dir, Log: log, Tools: &tools, HandleSignals: true})
	if err != nil {
		t.Fatal(err)
	}
	xpkg := buildFunctionAutoReady(ctx, t, tools, dir)
	ref, err := h.PushPackage(ctx, xpkg, "function-auto-ready:v0.6.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.InstallFunction(ctx, "function-auto-ready", ref, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"kubeconfig": h.Kubeconfig(), "registry": h.RegistryHost()})
	if err := os.WriteFile(os.Getenv("HARNESS_HELPER_READY"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
}
