package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgetco/crossplane-widget/apis"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func init() { register(20, "provider", providerSection) }

// providerSection: N Widgets to Ready, against raw API server creates.
func providerSection(t *testing.T, b *bench) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }

	// Provider.
	n := envInt("WIDGET_BENCH_N", 200)
	runs := envInt("WIDGET_BENCH_RUNS", 1)
	const workers = 8
	steady := time.Duration(envInt("WIDGET_BENCH_STEADY_SECONDS", 30)) * time.Second
	var extra []string
	if a := os.Getenv("WIDGET_BENCH_PROVIDER_ARGS"); a != "" {
		extra = strings.Fields(a)
	}
	k := b.kube(t)
	provBin := b.build(t, "provider-widget", "./provider")
	pr := make([]providerRun, 0, runs)
	for i := range runs {
		r := runProvider(t, k, provBin, i, n, workers, steady, extra)
		t.Logf("provider run %d: all Ready in %s, p50 %s, p99 %s, raw ConfigMaps %s", i, r.allReady, quantile(r.toReady, .5), quantile(r.toReady, .99), r.rawCreate)
		pr = append(pr, r)
	}

	w("## provider-widget: %d Widgets to Ready\n\n", n)
	w("envtest (kube-apiserver v1.35.4 + etcd, from `hack/tools.sh`) with the provider's CRDs; the\n")
	w("provider binary as a subprocess with `%s` (plus `--kubeconfig`); the reference Widget API in the\n", strings.Join(append([]string{"--metrics-bind-address <free port> --health-probe-bind-address 0"}, pr[0].args[4:]...), " "))
	w("test process over loopback HTTP (no contract checker), with **zero provisioning delay and no rate limit**,\n")
	w("one project, one namespaced ProviderConfig. The provider is started and serving metrics first; then %d\n", n)
	w("Widgets (size medium, one label) are created by %d concurrent clients, and a watch records when each is\n", workers)
	w("first Ready=True. Time-to-Ready is from the Widget's create request to that watch event. In the same run\n")
	w("and before the provider starts, the same %d clients create %d plain ConfigMaps: what the API server takes.\n\n", workers, n)
	w("| run | all Ready | per Widget p50 | p90 | p99 | max | Widgets Ready/s | raw ConfigMap creates/s | provider rate / raw | reconciles | reconciles/s | kube-apiserver requests/Widget | Widget API requests/Widget | provider RSS |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	rates, raws, ratios := make([]float64, 0, len(pr)), make([]float64, 0, len(pr)), make([]float64, 0, len(pr))
	for i, r := range pr {
		rate := float64(n) / r.allReady.Seconds()
		raw := float64(r.rawCreateCount) / r.rawCreate.Seconds()
		rates, raws, ratios = append(rates, rate), append(raws, raw), append(ratios, rate/raw)
		w("| %d | %s | %s | %s | %s | %s | %.1f | %.0f | %.1f%% | %.0f | %.1f | %.1f | %.1f | %.0f MB |\n", i+1,
			secs(r.allReady), secs(quantile(r.toReady, .5)), secs(quantile(r.toReady, .9)), secs(quantile(r.toReady, .99)), secs(quantile(r.toReady, 1)),
			rate, raw, 100*rate/raw, r.reconciles, r.reconciles/r.allReady.Seconds(), r.kubeRequests/float64(n), r.apiTotal/float64(n), float64(r.rssKB)/1024)
	}
	if len(pr) > 1 {
		w("| median | | | | | | %.1f | %.0f | %.1f%% | | | | | |\n", medianF(rates), medianF(raws), 100*medianF(ratios))
	}
	last := pr[len(pr)-1]
	w("\nWidget API requests during creation (last run), by operation:\n\n| operation | requests | per Widget |\n| --- | ---: | ---: |\n")
	for _, op := range sortedKeys(last.apiRequests) {
		w("| %s | %.0f | %.2f |\n", op, last.apiRequests[op], last.apiRequests[op]/float64(n))
	}
	if last.steady > 0 {
		per := float64(time.Hour) / float64(last.steady) / float64(n)
		w("\n**Steady state** (last run): in the %s after all were Ready, %.0f reconciles, %.0f kube-apiserver\n", last.steady, last.steadyRecs, last.steadyKube)
		w("requests and %.0f Widget API requests (including change-feed long polls), i.e. about %.1f, %.1f and %.1f per\n", last.steadyAPI, last.steadyRecs*per, last.steadyKube*per, last.steadyAPI*per)
		w("Widget per hour if extrapolated linearly. The window is much shorter than the poll interval, so this is a rough\n")
		w("figure: a proper steady-state measurement needs a window of several poll intervals.\n")
	}
	png := filepath.Join(b.docDir, "benchmarks-time-to-ready.png")
	if err := writeHistogram(png, last.toReady); err != nil {
		t.Fatal(err)
	}
	w("\n![time-to-Ready histogram](%s)\n\n", filepath.Base(png))
	w("Time-to-Ready of the last run's %d Widgets: %s; x axis 0 to %s (the slowest), one bar per\n", n, filepath.Base(png), secs(quantile(last.toReady, 1)))
	w("1/40 of it; y axis: Widgets per bar, scaled to the tallest. Grid lines every 1/4 of each axis.\n")

	return doc.String()
}

// kubeEnv is envtest (kube-apiserver + etcd) with the provider's CRDs and a
// kubeconfig for the provider.
type kubeEnv struct {
	kube       client.WithWatch
	kubeconfig string
}

func startKube(t *testing.T, root string) *kubeEnv {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "package", "provider", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cfg.QPS, cfg.Burst = 1000, 2000 // measure the API server, not our client's limiter
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apis.AddToScheme(scheme)
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "provider-widget", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubeEnv{kube: kube, kubeconfig: path}
}

// createAll creates n objects from mk with workers concurrent clients and
// returns when each create was sent and how long all took.
func createAll(t *testing.T, kube client.Client, n, workers int, mk func(i int) client.Object) (map[string]time.Time, time.Duration) {
	t.Helper()
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range work {
				o := mk(i)
				at := time.Now()
				if err := kube.Create(context.Background(), o); err != nil {
					t.Errorf("cannot create %s: %v", o.GetName(), err)
					continue
				}
				mu.Lock()
				sent[o.GetName()] = at
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return sent, time.Since(start)
}

// rawCreate measures how fast the API server creates n plain ConfigMaps.
func rawCreate(t *testing.T, k *kubeEnv, ns string, n, workers int) time.Duration {
	t.Helper()
	if err := k.kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	_, d := createAll(t, k.kube, n, workers, func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%05d", i)}, Data: map[string]string{"size": "medium", "team": "a"}}
	})
	return d
}

// providerRun is the outcome of one provider run.
type providerRun struct {
	n              int
	args           []string
	createFor      time.Duration   // sending all creates
	allReady       time.Duration   // first create sent to last Widget Ready
	toReady        []time.Duration // per Widget, create sent to Ready
	reconciles     float64
	kubeRequests   float64 // from the provider, rest_client_requests_total
	apiRequests    map[string]float64
	apiTotal       float64
	steady         time.Duration
	steadyKube     float64
	steadyAPI      float64
	steadyRecs     float64
	rssKB          int
	rawCreate      time.Duration
	rawCreateCount int
}

// runProvider starts a Widget API server and the provider, creates n
// Widgets and waits for all to be Ready.
func runProvider(t *testing.T, k *kubeEnv, bin string, run, n, workers int, steady time.Duration, extra []string) providerRun {
	t.Helper()
	r := providerRun{n: n, apiRequests: map[string]float64{}, steady: steady, rawCreateCount: n}
	r.rawCreate = rawCreate(t, k, fmt.Sprintf("raw-%d", run), n, workers)

	s, err := server.New(server.Options{DataDir: t.TempDir(), Tokens: map[string]string{"bench-token": "bench"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer func() { s.Shutdown(); hs.Close(); _ = s.Close() }()

	ns := fmt.Sprintf("bench-%d", run)
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widget-token"}, StringData: map[string]string{"token": "bench-token"}},
		&nsv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
			Spec: commonv1alpha1.LocalProviderConfigSpec{
				APIConnection: commonv1alpha1.APIConnection{Endpoint: hs.URL},
				Credentials: commonv1alpha1.LocalProviderCredentials{
					Source:    xpv2.CredentialsSourceSecret,
					SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "widget-token"}, Key: "token"},
				},
			},
		},
	} {
		if err := k.kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	metrics := freeAddr(t)
	r.args = append([]string{"--metrics-bind-address", metrics, "--health-probe-bind-address", "0"}, extra...)
	cmd := exec.Command(bin, append([]string{"--kubeconfig", k.kubeconfig}, r.args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(t.TempDir(), "provider.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
	}
	defer stop()
	// Wait until the provider serves metrics, so that its start-up is not
	// part of time-to-Ready.
	for deadline := time.Now().Add(60 * time.Second); promSum(metrics, "controller_runtime_reconcile_total") < 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the provider did not start; log in %s", logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // let controllers start their informers
	kube0 := promSum(metrics, "rest_client_requests_total")

	readyAt := make(map[string]time.Time, n)
	var mu sync.Mutex
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	allReady := make(chan struct{})
	go watchReady(watchCtx, t, k.kube, ns, n, readyAt, &mu, allReady)

	var sent map[string]time.Time
	sent, r.createFor = createAll(t, k.kube, n, workers, func(i int) client.Object {
		w := &nsv1alpha1.Widget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%05d", i)},
			Spec: nsv1alpha1.WidgetSpec{ForProvider: commonv1alpha1.WidgetParameters{
				Size: ptr.To("medium"), Labels: map[string]string{"team": "a"},
			}},
		}
		w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
		return w
	})
	select {
	case <-allReady:
	case <-time.After(time.Duration(n)*200*time.Millisecond + 2*time.Minute):
		mu.Lock()
		got := len(readyAt)
		mu.Unlock()
		t.Fatalf("only %d of %d Widgets Ready; provider log in %s", got, n, logf.Name())
	}
	first, last := time.Time{}, time.Time{}
	mu.Lock()
	for name, at := range sent {
		ra := readyAt[name]
		r.toReady = append(r.toReady, ra.Sub(at))
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if ra.After(last) {
			last = ra
		}
	}
	mu.Unlock()
	r.allReady = last.Sub(first)
	r.reconciles = promSum(metrics, "controller_runtime_reconcile_total")
	r.kubeRequests = promSum(metrics, "rest_client_requests_total") - kube0
	r.apiRequests, r.apiTotal = apiRequests(t, s)
	r.rssKB = rssOf(cmd.Process.Pid)

	if steady > 0 {
		time.Sleep(steady)
		r.steadyRecs = promSum(metrics, "controller_runtime_reconcile_total") - r.reconciles
		r.steadyKube = promSum(metrics, "rest_client_requests_total") - kube0 - r.kubeRequests
		_, tot := apiRequests(t, s)
		r.steadyAPI = tot - r.apiTotal
		if rss := rssOf(cmd.Process.Pid); rss > r.rssKB {
			r.rssKB = rss
		}
	}
	stop()
	return r
}

// watchReady records when each Widget in ns is first seen Ready=True and
// closes done when n are.
func watchReady(ctx context.Context, t *testing.T, kube client.WithWatch, ns string, n int, readyAt map[string]time.Time, mu *sync.Mutex, done chan struct{}) {
	see := func(w *nsv1alpha1.Widget) {
		if w.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := readyAt[w.Name]; ok {
			return
		}
		readyAt[w.Name] = now
		if len(readyAt) == n {
			close(done)
		}
	}
	for ctx.Err() == nil {
		l := &nsv1alpha1.WidgetList{}
		if err := kube.List(ctx, l, client.InNamespace(ns)); err != nil {
			if ctx.Err() == nil {
				t.Logf("cannot list Widgets: %v", err)
				time.Sleep(time.Second)
			}
			continue
		}
		for i := range l.Items {
			see(&l.Items[i])
		}
		wi, err := kube.Watch(ctx, &nsv1alpha1.WidgetList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
		if err != nil {
			continue
		}
		for ev := range wi.ResultChan() {
			if w, ok := ev.Object.(*nsv1alpha1.Widget); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				see(w)
			}
		}
		wi.Stop()
	}
}

// apiRequests sums the Widget API server's widgetapi_requests_total by
// method and route.
func apiRequests(t *testing.T, s *server.Server) (map[string]float64, float64) {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	by, total := map[string]float64{}, 0.0
	for _, mf := range mfs {
		if mf.GetName() != "widgetapi_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			v := m.GetCounter().GetValue()
			by[l["method"]+" "+l["route"]] += v
			total += v
		}
	}
	return by, total
}

// promSum returns the sum of every sample of a metric served at addr, or -1
// when it cannot be read.
func promSum(addr, name string) float64 {
	rsp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback, short-lived
	if err != nil {
		return -1
	}
	defer rsp.Body.Close()
	sum, seen := 0.0, false
	sc := bufio.NewScanner(rsp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			sum += v
			seen = true
		}
	}
	_, _ = io.Copy(io.Discard, rsp.Body)
	if !seen {
		return 0
	}
	return sum
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
