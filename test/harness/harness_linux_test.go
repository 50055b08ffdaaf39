package harness

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// Generous bounds for a slow, shared 2-core machine. Nothing asserts on how
// long anything takes; these only stop a hung test.
const (
	waitTimeout = 5 * time.Minute
	testTimeout = 15 * time.Minute
)

// TestHarness starts the whole local control plane, installs
// function-auto-ready as a real Function package from the loopback registry,
// proves core calls it over mTLS by running a composition pipeline, installs
// a tiny provider package whose managed resource CRD gets served and
// converted by the provider's conversion webhook, proves core's own webhook
// answers kube-apiserver, and checks that Stop leaves no process or port
// behind.
//
// One story, told in order: one step per subtest, each a method of story.
func TestHarness(t *testing.T) {
	s := startStory(t)
	t.Run("WidgetAPIServes", s.widgetAPIServes)
	t.Run("FunctionBecomesHealthy", s.functionBecomesHealthy)
	t.Run("ServiceReachableByClusterIP", s.serviceReachableByClusterIP)
	t.Run("CoreWebhookRefusesDeletingInUse", s.coreWebhookRefusesDeletingInUse)
	if s.fn == nil {
		t.FailNow()
	}
	t.Run("CoreRunsPipelineOverTLS", s.coreRunsPipelineOverTLS)
	t.Run("FunctionCrashIsReportedAndRecovered", s.functionCrashIsReportedAndRecovered)
	t.Run("ProviderSmoke", s.providerSmoke)
	t.Run("ProviderConversionWebhook", s.providerConversionWebhook)
	t.Run("GarbageCollection", s.garbageCollection)
	t.Run("DumpDiagnostics", s.dumpDiagnostics)
	s.checkTeardown(t)
}

// A story is TestHarness's control plane and what its steps leave for the
// next.
type story struct {
	ctx      context.Context
	tools    Tools
	dir      string
	h        *Harness
	ref      string // function-auto-ready's package in the loopback registry
	fn       *Runtime
	begin    time.Time
	startDur time.Duration
	fnDur    time.Duration
	stopped  bool
}

// startStory starts the harness with a Widget API and pushes
// function-auto-ready's package to its registry.
func startStory(t *testing.T) *story {
	t.Helper()
	tools := integrationTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	dir := keptDir(t)
	log := testLogger(t)

	s := &story{ctx: ctx, tools: tools, dir: dir, begin: time.Now()}
	h, err := Start(ctx, Options{
		Dir:       dir,
		Log:       log,
		Tools:     &tools,
		WidgetAPI: &server.Options{Tokens: map[string]string{"harness-token": "harness"}},
	})
	if err != nil {
		t.Fatalf("Start(...): %v", err)
	}
	s.h, s.startDur = h, time.Since(s.begin)
	t.Cleanup(func() {
		if !s.stopped {
			_ = h.Stop()
		}
	})
	t.Cleanup(func() {
		if t.Failed() && !s.stopped {
			if d, err := h.DumpDiagnostics(context.Background(), ""); err == nil {
				t.Logf("Diagnostics in %s", d)
			}
		}
	})

	xpkg := buildFunctionAutoReady(ctx, t, tools, dir)
	s.ref, err = h.PushPackage(ctx, xpkg, "crossplane-contrib/function-auto-ready:v0.6.0")
	if err != nil {
		t.Fatalf("PushPackage(...): %v", err)
	}
	if want := h.RegistryHost() + "/"; !strings.HasPrefix(s.ref, want) {
		t.Fatalf("PushPackage(...): ref %q does not name the loopback registry %s", s.ref, h.RegistryHost())
	}
	return s
}

// checkTeardown checks what the harness runs listens only on loopback, and
// that Stop ends every process and frees every port.
func (s *story) checkTeardown(t *testing.T) {
	h := s.h

	// Everything the harness runs is a descendant of this process. Check what
	// they listen on, stop, and check that they and their ports are gone.
	procs := descendants(os.Getpid())
	// The registry and the Widget API server run in this process.
	socks := listeners(map[int]string{os.Getpid(): "harness.test"})
	for pid, addrs := range listeners(procs) {
		socks[pid] = addrs
	}
	// Listening addresses, not ports: on a shared machine another
	// process may listen on the same port at another loopback address.
	listening := map[string]string{}
	for pid, addrs := range socks {
		for _, a := range addrs {
			host, p, _ := net.SplitHostPort(a)
			n, _ := strconv.Atoi(p)
			listening[a] = strconv.Itoa(pid) + " " + procs[pid]
			if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && !coreWildcardPort(h, n) {
				t.Errorf("pid %d (%s) listens on %s, want a loopback address", pid, procs[pid], a)
			}
		}
	}
	t.Logf("Processes before Stop: %v", procs)
	t.Logf("Listening sockets before Stop: %v", socks)
	for _, want := range []string{"etcd", "kube-apiserver", "crossplane", "function-auto-"} {
		if !hasProc(procs, want) {
			t.Errorf("no %q among the harness's processes %v", want, procs)
		}
	}

	ts := time.Now()
	if err := h.Stop(); err != nil {
		t.Errorf("Stop(): %v", err)
	}
	s.stopped = true
	stopDur := time.Since(ts)
	select {
	case <-h.Done():
	default:
		t.Errorf("Done() not closed after Stop()")
	}
	for pid, name := range procs {
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running after Stop()", name, pid)
		}
	}
	open := listeningAddrs()
	for a, what := range listening {
		if open[a] {
			t.Errorf("%s (was pid %s) is still listening after Stop()", a, what)
		}
	}
	if c, err := net.DialTimeout("tcp", h.RegistryHost(), time.Second); err == nil {
		_ = c.Close()
		t.Errorf("registry %s still accepts connections after Stop()", h.RegistryHost())
	}
	t.Logf("TIMINGS: harness start %s, function healthy %s (install to Healthy), teardown %s, test total %s",
		s.startDur.Round(100*time.Millisecond), s.fnDur.Round(100*time.Millisecond), stopDur.Round(100*time.Millisecond), time.Since(s.begin).Round(100*time.Millisecond))
}
