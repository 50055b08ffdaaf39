//go:build linux

package bench

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/providerenv"
)

// kubeEnv is envtest (kube-apiserver + etcd) with the provider's CRDs and a
// kubeconfig for the provider (test/lib/providerenv).
type kubeEnv struct {
	kube       client.WithWatch
	kubeconfig string
}

func startKube(t *testing.T, root string) *kubeEnv {
	t.Helper()
	k, err := providerenv.StartKube(providerenv.Options{
		Root: root,
		Dir:  t.TempDir(),
		// Measure the API server, not our client's limiter (at 1000/s and
		// a burst of 2000 the raw creates of 10,000 objects measured the
		// limiter: 1,250/s).
		QPS: 100000, Burst: 200000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	return &kubeEnv{kube: k.Client, kubeconfig: k.Kubeconfig}
}

// setupWidgetProject creates namespace ns with a Secret holding token and a
// ProviderConfig "default" pointing at the Widget API at endpoint.
func setupWidgetProject(t *testing.T, k *kubeEnv, ns, endpoint, token string) {
	t.Helper()
	if err := k.kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := providerenv.Project(context.Background(), k.kube, ns, endpoint, token); err != nil {
		t.Fatal(err)
	}
}

// providerProcess is a provider-widget subprocess.
type providerProcess struct {
	args    []string // its flags after --kubeconfig
	metrics string   // address of its /metrics
	pprof   string   // address of its /debug/pprof, with WIDGET_BENCH_PPROF=1
	log     string   // its log file
	pid     int
	stop    func() // idempotent; also run at the end of the test
}

// startProviderProcess starts bin against k with extra flags, logging to
// provider-<name>.log (in WIDGET_BENCH_LOGS when set), and returns once it
// serves metrics and its controllers had a second to start their informers.
func startProviderProcess(t *testing.T, k *kubeEnv, bin, name string, extra []string) *providerProcess {
	t.Helper()
	args := append([]string(nil), extra...)
	pprof := ""
	if os.Getenv("WIDGET_BENCH_PPROF") == "1" {
		var err error
		if pprof, err = proc.FreeAddr(); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--pprof-bind-address", pprof)
	}
	logDir := os.Getenv("WIDGET_BENCH_LOGS")
	if logDir == "" {
		logDir = t.TempDir()
	}
	pp, err := providerenv.StartProvider(bin, k.kubeconfig, filepath.Join(logDir, "provider-"+name+".log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	metrics := pp.Metrics
	p := &providerProcess{args: append([]string{"--metrics-bind-address", metrics, "--health-probe-bind-address", "0"}, args...), metrics: metrics, pprof: pprof, log: pp.LogPath(), pid: pp.PID()}
	p.stop = func() { _ = pp.Stop() }
	t.Cleanup(p.stop)
	for deadline := time.Now().Add(60 * time.Second); promSum(metrics, "controller_runtime_reconcile_total") < 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the provider did not start; log in %s", p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	return p
}

// saveHeapProfile writes the provider's heap profile (after a GC) to
// _output/bench/heap-<name>.pb.gz when it serves pprof, for
// `go tool pprof -top`, and logs where.
func saveHeapProfile(t *testing.T, p *providerProcess, name string) {
	t.Helper()
	if p.pprof == "" {
		return
	}
	rsp, err := http.Get("http://" + p.pprof + "/debug/pprof/heap?gc=1") //nolint:noctx // a bench on loopback
	if err != nil {
		t.Errorf("cannot read the heap profile: %v", err)
		return
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Errorf("cannot read the heap profile: %v", err)
		return
	}
	dir := filepath.Join("..", "..", "_output", "bench")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "heap-"+name+".pb.gz")
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap profile of provider %s: %s (go tool pprof -top %s)", name, out, out)
}

// createAll creates n objects from mk with workers concurrent clients and
// returns when each create was sent and how long all took.
func createAll(t *testing.T, kube client.Client, n, workers int, mk func(i int) client.Object) (map[string]time.Time, time.Duration) {
	t.Helper()
	sent := make(map[string]time.Time, n)
	var mu sync.Mutex
	start := time.Now()
	parallel(n, workers, func(i int) {
		o := mk(i)
		at := time.Now()
		if err := kube.Create(context.Background(), o); err != nil {
			t.Errorf("cannot create %s: %v", o.GetName(), err)
			return
		}
		mu.Lock()
		sent[o.GetName()] = at
		mu.Unlock()
	})
	return sent, time.Since(start)
}

// parallel calls fn for 0..n-1 on workers goroutines and returns when all
// calls have returned.
func parallel(n, workers int, fn func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				fn(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// watchReady records when each Widget in ns is first seen Ready=True and
// closes done when n are.
func watchReady(ctx context.Context, t *testing.T, kube client.WithWatch, ns string, n int, readyAt map[string]time.Time, mu *sync.Mutex, done chan struct{}) {
	see := func(w *nsv1beta1.Widget) {
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
		l := &nsv1beta1.WidgetList{}
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
		wi, err := kube.Watch(ctx, &nsv1beta1.WidgetList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
		if err != nil {
			continue
		}
		for ev := range wi.ResultChan() {
			if w, ok := ev.Object.(*nsv1beta1.Widget); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				see(w)
			}
		}
		wi.Stop()
	}
}

// cleanup removes what a run left in ns once its provider has stopped, so
// that the next run's provider (they share envtest) does not reconcile it:
// Widgets and the ProviderConfig lose their finalizers, then everything the
// run created there is deleted.
func cleanup(t *testing.T, k *kubeEnv, ns string, workers int) {
	t.Helper()
	ctx := context.Background()
	l := &nsv1beta1.WidgetList{}
	if err := k.kube.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	objs := make([]client.Object, 0, len(l.Items)+1)
	for i := range l.Items {
		objs = append(objs, &l.Items[i])
	}
	objs = append(objs, &nsv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})
	work := make(chan client.Object)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o := range work {
				p := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
				if err := k.kube.Patch(ctx, o, p); client.IgnoreNotFound(err) != nil {
					t.Errorf("cannot remove the finalizers of %s: %v", o.GetName(), err)
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	for _, o := range []client.Object{&nsv1beta1.Widget{}, &nsv1alpha1.ProviderConfigUsage{}, &nsv1alpha1.ProviderConfig{}} {
		// Deleting 20,000 objects in one request can outlast the API
		// server's request timeout (the deletion goes on without the
		// response): try again, which finishes what is left.
		var err error
		for attempt := range 5 {
			if err = k.kube.DeleteAllOf(ctx, o, client.InNamespace(ns)); err == nil {
				break
			}
			t.Logf("deleting the run's %T objects, attempt %d: %v", o, attempt+1, err)
			time.Sleep(5 * time.Second)
		}
		if err != nil {
			t.Errorf("cannot delete the run's %T objects: %v", o, err)
		}
	}
}
