//go:build linux

package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func init() { register(25, "rotation", rotationSection) }

// rotationRun is one run of the key rotation benchmark.
type rotationRun struct {
	n int
	// rotated: from the rotate-now request to each connection Secret
	// holding the new key (and the previous one as previousKey).
	rotated []time.Duration
	// rotateAll: from the first request to the last Secret rotated.
	rotateAll time.Duration
	// revoked: from the nudge after the overlap to each Secret holding
	// only the new key (the previous one revoked first).
	revoked   []time.Duration
	revokeAll time.Duration
	// throttled and requests are the Widget API's 429s and requests
	// during the rotations and revocations.
	throttled, requests float64
	// perKey is the Widget API requests per key, by operation and code.
	perKey string
}

// rotationSection measures 1,000 (WIDGET_BENCH_ROTATION_N) WidgetKeys, one
// per widget, whose rotation falls due at once, against a Widget API limited
// to WIDGET_BENCH_ROTATION_LIMIT requests per second (default 100, burst the
// same): rotations per second with the 429s honoured, and the time from due
// to rotated and from the overlap's end to revoked, p50/p99. Repeated
// WIDGET_BENCH_ROTATION_RUNS times (default 3), each on a fresh namespace and
// provider.
func rotationSection(t *testing.T, b *bench) string {
	n := envInt("WIDGET_BENCH_ROTATION_N", 1000)
	limit := envInt("WIDGET_BENCH_ROTATION_LIMIT", 100)
	runs := envInt("WIDGET_BENCH_ROTATION_RUNS", 3)
	k := b.kube(t)
	bin := b.build(t, "provider-widget", "./provider")
	out := make([]rotationRun, 0, runs)
	for i := range runs {
		r := runRotation(t, k, bin, fmt.Sprintf("rot-%d", i), n, limit)
		t.Logf("rotation run %d: %d keys rotated in %s (p50 %s, p99 %s), revoked in %s (p50 %s, p99 %s); %.0f of %.0f Widget API requests answered 429",
			i, n, r.rotateAll.Round(time.Millisecond), quantile(r.rotated, 0.5).Round(time.Millisecond), quantile(r.rotated, 0.99).Round(time.Millisecond),
			r.revokeAll.Round(time.Millisecond), quantile(r.revoked, 0.5).Round(time.Millisecond), quantile(r.revoked, 0.99).Round(time.Millisecond), r.throttled, r.requests)
		out = append(out, r)
	}
	var s strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&s, format, a...) }
	w("## provider-widget: key rotation\n\n")
	w("%d WidgetKeys (one per widget, period 24h, overlap 1h) whose rotation falls due at once (a `requestedAt` on each),\n", n)
	w("against a Widget API limited to %d requests/s per token (burst %d), default provider flags. Rotated: from\n", limit, limit)
	w("the request to the connection Secret holding the new key and the previous one; revoked: from the overlap's end\n")
	w("(the test clock moved forward, each WidgetKey nudged) to the Secret holding only the new key.\n\n")
	w("| run | rotations/s | rotated p50 | rotated p99 | revoked p50 | revoked p99 | 429s / Widget API requests |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	rates := make([]float64, 0, len(out))
	r50, r99 := make([]time.Duration, 0, len(out)), make([]time.Duration, 0, len(out))
	v50, v99 := make([]time.Duration, 0, len(out)), make([]time.Duration, 0, len(out))
	for i, r := range out {
		rate := float64(r.n) / r.rotateAll.Seconds()
		rates = append(rates, rate)
		r50, r99 = append(r50, quantile(r.rotated, 0.5)), append(r99, quantile(r.rotated, 0.99))
		v50, v99 = append(v50, quantile(r.revoked, 0.5)), append(v99, quantile(r.revoked, 0.99))
		w("| %d | %.1f | %s | %s | %s | %s | %.0f / %.0f |\n", i+1, rate, secs(r50[i]), secs(r99[i]), secs(v50[i]), secs(v99[i]), r.throttled, r.requests)
	}
	w("| median | %.1f | %s | %s | %s | %s | |\n", medianF(rates), secs(medianD(r50)), secs(medianD(r99)), secs(medianD(v50)), secs(medianD(v99)))
	for i, r := range out {
		w("\nRun %d, Widget API requests per key for the rotation and the revocation: %s.\n", i+1, r.perKey)
	}
	return s.String()
}

// runRotation runs one rotation benchmark in namespace ns.
func runRotation(t *testing.T, k *kubeEnv, bin, ns string, n, limit int) rotationRun {
	t.Helper()
	ctx := context.Background()
	var off atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	clockFile := filepath.Join(t.TempDir(), "clock")
	s, err := server.New(server.Options{
		DataDir: t.TempDir(),
		Tokens:  map[string]string{"bench-token": "bench", "seed-token": "bench"},
		// The seed token seeds and checks; the provider's is limited
		// alone (limits are per token).
		RateLimit: float64(limit), RateBurst: limit,
		Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer func() { s.Shutdown(); hs.Close(); _ = s.Close() }()
	seed, err := widgetapi.New(hs.URL, widgetapi.WithToken("seed-token"))
	if err != nil {
		t.Fatal(err)
	}
	// The widgets, owned by Widgets of ns (which need not exist: the
	// owner marker is what a WidgetKey's reach is checked against). The
	// seed token is limited too: it waits out its 429s.
	parallel(n, 8, func(i int) {
		req := widgetapi.CreateWidgetRequest{Name: fmt.Sprintf("%s-w-%05d", ns, i), Size: "small", Labels: map[string]string{"widgetco.io/owner": fmt.Sprintf("n_%s.w-%05d", ns, i)}}
		for {
			_, err := seed.CreateWidget(ctx, req)
			if d, ok := widgetapi.IsRateLimited(err); ok {
				time.Sleep(d)
				continue
			}
			if err != nil {
				t.Errorf("cannot seed widget: %v", err)
			}
			return
		}
	})
	setupWidgetProject(t, k, ns, hs.URL, "bench-token")
	p := startProviderProcess(t, k, bin, ns, []string{"--test-clock-file", clockFile})
	defer p.stop()

	name := func(i int) string { return fmt.Sprintf("k-%05d", i) }
	createAll(t, k.kube, n, 16, func(i int) client.Object {
		key := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
		key.Spec.ForProvider.WidgetName = ptr.To(fmt.Sprintf("%s-w-%05d", ns, i))
		key.Spec.ForProvider.Rotation = &commonv1beta1.KeyRotation{Period: &metav1.Duration{Duration: 24 * time.Hour}, Overlap: metav1.Duration{Duration: time.Hour}}
		key.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
		key.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: name(i)}
		return key
	})
	waitSecrets(t, k, ns, n, 10*time.Minute, func(d map[string][]byte) bool { return len(d["key"]) > 0 && len(d["previousKey"]) == 0 })
	// Let the creates' echoes (feed, status) settle.
	time.Sleep(5 * time.Second)

	r := rotationRun{n: n}
	by0, api0 := apiRequests(t, s)
	thr0 := throttledRequests(s)
	off.Add(int64(time.Minute))
	writeClock(t, clockFile, time.Duration(off.Load()))
	req := metav1.NewTime(now().Truncate(time.Second))
	sent := map[string]time.Time{}
	var mu sync.Mutex
	start := time.Now()
	parallel(n, 16, func(i int) {
		at := time.Now()
		patch := fmt.Sprintf(`{"spec":{"forProvider":{"rotation":{"requestedAt":%q}}}}`, req.UTC().Format(time.RFC3339))
		if err := k.kube.Patch(ctx, &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Errorf("cannot request a rotation: %v", err)
		}
		mu.Lock()
		sent[name(i)] = at
		mu.Unlock()
	})
	done := waitSecrets(t, k, ns, n, 15*time.Minute, func(d map[string][]byte) bool {
		return strings.HasSuffix(string(d["keyName"]), "-r1") && len(d["previousKey"]) > 0
	})
	for n, at := range done {
		r.rotated = append(r.rotated, at.Sub(sent[n]))
		r.rotateAll = max(r.rotateAll, at.Sub(start))
	}

	// The overlap ends: move the clock past it, and nudge every
	// WidgetKey as its wake-up would (an annotation the provider does
	// not write).
	off.Add(int64(time.Hour + time.Minute))
	writeClock(t, clockFile, time.Duration(off.Load()))
	sent = map[string]time.Time{}
	start = time.Now()
	parallel(n, 16, func(i int) {
		at := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.widgetco.io/nudge":%q}}}`, at.Format(time.RFC3339Nano))
		if err := k.kube.Patch(ctx, &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Errorf("cannot nudge: %v", err)
		}
		mu.Lock()
		sent[name(i)] = at
		mu.Unlock()
	})
	done = waitSecrets(t, k, ns, n, 15*time.Minute, func(d map[string][]byte) bool {
		return strings.HasSuffix(string(d["keyName"]), "-r1") && len(d["previousKey"]) == 0
	})
	for n, at := range done {
		r.revoked = append(r.revoked, at.Sub(sent[n]))
		r.revokeAll = max(r.revokeAll, at.Sub(start))
	}
	by1, api1 := apiRequests(t, s)
	r.requests = api1 - api0
	perKey := []string{}
	for _, e := range sortedKeysDesc(by1) {
		if d := e.v - by0[e.k]; d > 0 {
			perKey = append(perKey, fmt.Sprintf("%s %.2f", e.k, d/float64(n)))
		}
	}
	r.perKey = strings.Join(perKey, ", ")
	r.throttled = throttledRequests(s) - thr0

	// Every widget keeps exactly its new key.
	var wrong atomic.Int32
	parallel(n, 8, func(i int) {
		for {
			l, err := seed.ListKeys(ctx, fmt.Sprintf("%s-w-%05d", ns, i))
			if d, ok := widgetapi.IsRateLimited(err); ok {
				time.Sleep(d)
				continue
			}
			if err != nil || len(l.Items) != 1 || !strings.HasSuffix(l.Items[0].Name, "-r1") {
				wrong.Add(1)
			}
			return
		}
	})
	if wrong.Load() > 0 {
		t.Errorf("%d widgets do not hold exactly their rotated key", wrong.Load())
	}
	p.stop()
	cleanupKeys(t, k, ns)
	return r
}

// cleanupKeys removes the WidgetKeys of ns, once their provider has
// stopped, so that the next run's provider does not reconcile them.
func cleanupKeys(t *testing.T, k *kubeEnv, ns string) {
	t.Helper()
	ctx := context.Background()
	l := &nsv1beta1.WidgetKeyList{}
	if err := k.kube.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	parallel(len(l.Items), 16, func(i int) {
		key := &l.Items[i]
		_ = k.kube.Patch(ctx, key, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = k.kube.Delete(ctx, key)
	})
}

func writeClock(t *testing.T, file string, off time.Duration) {
	t.Helper()
	if err := os.WriteFile(file, []byte(off.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitSecrets polls the connection Secrets of ns until n satisfy ok, and
// returns when each was first seen to.
func waitSecrets(t *testing.T, k *kubeEnv, ns string, n int, timeout time.Duration, ok func(map[string][]byte) bool) map[string]time.Time {
	t.Helper()
	seen := map[string]time.Time{}
	deadline := time.Now().Add(timeout)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("after %s only %d of %d connection Secrets are as wanted", timeout, len(seen), n)
		}
		l := &corev1.SecretList{}
		if err := k.kube.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		for i := range l.Items {
			sec := &l.Items[i]
			if _, done := seen[sec.Name]; done || sec.Type != "connection.crossplane.io/v1alpha1" {
				continue
			}
			if ok(sec.Data) {
				seen[sec.Name] = at
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return seen
}

// throttledRequests returns the Widget API's 429s so far.
func throttledRequests(s *server.Server) float64 {
	mfs, err := s.Registry().Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() == "widgetapi_throttled_requests_total" {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}
