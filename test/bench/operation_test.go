//go:build linux

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func init() { register(45, "operation", operationSection) }

// opNamespace holds the operation section's XWidgets.
const opNamespace = "bench-op"

// operationRun is one run of the rotate-now Operation benchmark.
type operationRun struct {
	n int
	// ready: from the first create to every XWidget's connection Secret
	// holding its key.
	ready time.Duration
	// succeeded: from the Operation's create to its Succeeded condition
	// (core applied the rotation request to every XWidget).
	succeeded time.Duration
	// asked: from the Operation's create to each WidgetKey holding the
	// rotation request (core re-rendered its XWidget); askAll to the last.
	asked  []time.Duration
	askAll time.Duration
	// rotated: from the Operation's create to each connection Secret
	// holding a new key; rotateAll to the last one.
	rotated   []time.Duration
	rotateAll time.Duration
	// revokeAll: from the Operation's create to the last Secret holding
	// only its new key (the previous one revoked).
	revokeAll time.Duration
	// requests and throttled are the Widget API's requests and 429s from
	// the Operation's create to the last revocation.
	requests, throttled float64
	perKey              string
}

// operationSection measures a rotate-now of every key of N
// (WIDGET_BENCH_OPERATION_N, default 1,000) namespaced XWidgets of one key
// each, through one Operation of function-widget's RotateKeys step with
// revokePrevious, on the real one-node cluster with core's
// --enable-operations, against a Widget API limited to
// WIDGET_BENCH_OPERATION_LIMIT requests per second (default 100, burst the
// same). Repeated WIDGET_BENCH_OPERATION_RUNS times (default 3), each on a
// fresh cluster.
func operationSection(t *testing.T, b *bench) string {
	n := envInt("WIDGET_BENCH_OPERATION_N", 1000)
	limit := envInt("WIDGET_BENCH_OPERATION_LIMIT", 100)
	runs := envInt("WIDGET_BENCH_OPERATION_RUNS", 3)
	ctrllog.SetLogger(logr.Discard())
	coreArgs := envArgs("WIDGET_BENCH_E2E_CORE_ARGS")
	if len(coreArgs) == 0 {
		coreArgs = []string{"--max-concurrent-reconciles=10"} // the recommended install
	}
	coreArgs = append(coreArgs, "--enable-operations")
	load0 := loadAvg()
	out := make([]operationRun, 0, runs)
	for i := range runs {
		env := startE2EFor(t, b, e2eSetup{coreArgs: coreArgs, api: server.Options{RateLimit: float64(limit), RateBurst: limit}})
		r := env.rotateNow(t, n, fmt.Sprintf("rotate-now-%d", i))
		env.stop()
		t.Logf("operation run %d: %d XWidgets Ready in %s; Operation Succeeded after %s; WidgetKeys asked p50 %s, all %s; keys rotated p50 %s, all %s; all previous keys revoked %s; %.0f of %.0f Widget API requests answered 429",
			i+1, n, r.ready.Round(time.Millisecond), r.succeeded.Round(time.Millisecond), quantile(r.asked, 0.5).Round(time.Millisecond), r.askAll.Round(time.Millisecond), quantile(r.rotated, 0.5).Round(time.Millisecond),
			r.rotateAll.Round(time.Millisecond), r.revokeAll.Round(time.Millisecond), r.throttled, r.requests)
		out = append(out, r)
	}

	var s strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&s, format, a...) }
	w("## function-widget: rotate-now of every key through an Operation\n\n")
	w("%d namespaced XWidgets of one key each, Ready, then one Operation (`ops.crossplane.io/v1alpha1`) whose one step is\n", n)
	w("function-widget's RotateKeys over all of them with `revokePrevious`. Real one-node cluster, core v2.4.2 from its Helm\n")
	w("chart with `%s`, the Widget API limited to %d requests/s per token (burst %d), default provider flags;\n", strings.Join(coreArgs, " "), limit, limit)
	w("a fresh cluster per run; load average %s at the start, %s at the end. Times are from the Operation's create:\n", load0, loadAvg())
	w("**Succeeded** is core's condition on it, **asked** each WidgetKey holding the rotation request (core re-rendered\n")
	w("its XWidget through function-widget), **rotated** each connection Secret holding a new key, **revoked** the last\n")
	w("Secret holding only the new key (the previous one revoked first).\n\n")
	w("| run | XWidgets Ready | Succeeded | asked p50 | all asked | rotated p50 | rotated p99 | all rotated | all revoked | keys/s | 429s / Widget API requests |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	col := func(f func(r operationRun) time.Duration) []time.Duration {
		ds := make([]time.Duration, 0, len(out))
		for _, r := range out {
			ds = append(ds, f(r))
		}
		return ds
	}
	cols := [][]time.Duration{
		col(func(r operationRun) time.Duration { return r.ready }),
		col(func(r operationRun) time.Duration { return r.succeeded }),
		col(func(r operationRun) time.Duration { return quantile(r.asked, 0.5) }),
		col(func(r operationRun) time.Duration { return r.askAll }),
		col(func(r operationRun) time.Duration { return quantile(r.rotated, 0.5) }),
		col(func(r operationRun) time.Duration { return quantile(r.rotated, 0.99) }),
		col(func(r operationRun) time.Duration { return r.rotateAll }),
		col(func(r operationRun) time.Duration { return r.revokeAll }),
	}
	rates := make([]float64, 0, len(out))
	for i, r := range out {
		rates = append(rates, float64(r.n)/r.revokeAll.Seconds())
		w("| %d |", i+1)
		for _, c := range cols {
			w(" %s |", secs(c[i]))
		}
		w(" %.1f | %.0f / %.0f |\n", rates[i], r.throttled, r.requests)
	}
	w("| median |")
	for _, c := range cols {
		w(" %s |", secs(medianD(c)))
	}
	w(" %.1f | |\n", medianF(rates))
	for i, r := range out {
		w("\nRun %d, Widget API requests per key from the Operation to the last revocation: %s.\n", i+1, r.perKey)
	}
	return s.String()
}

// rotateNow creates n XWidgets of one key in opNamespace, waits for their
// keys, runs the RotateKeys Operation op over all of them, and waits until
// every connection Secret holds only a new key. It then checks with the
// Widget API that each widget holds exactly that key.
func (e *e2eEnv) rotateNow(t *testing.T, n int, op string) operationRun {
	t.Helper()
	ctx := context.Background()
	if err := platform.EnsureNamespace(ctx, e.c.Client(), opNamespace); err != nil {
		t.Fatal(err)
	}
	mk, _ := e.exampleMaker(t, kindXWidget.example)
	start := time.Now()
	createAll(t, e.kube, n, e2eWorkers, func(i int) client.Object {
		u := mk(opNamespace, fmt.Sprintf("x-%05d", i))
		if err := unstructured.SetNestedField(u.Object, int64(1), "spec", "keys"); err != nil {
			t.Fatal(err)
		}
		return u
	})
	for {
		ready := 0
		for _, d := range e.secrets(t) {
			if len(d["key-0-name"]) > 0 && len(d["key-0-previous"]) == 0 {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Since(start) > e2eWait {
			t.Fatalf("after %s only %d of %d XWidgets' connection Secrets hold their key (logs in %s)", e2eWait, ready, n, filepath.Join(e.dir, "logs"))
		}
		time.Sleep(250 * time.Millisecond)
	}
	r := operationRun{n: n, ready: time.Since(start)}
	// The key each Secret holds, and its widget.
	before, widgets := map[string]string{}, map[string]string{}
	for name, d := range e.secrets(t) {
		before[name], widgets[name] = string(d["key-0-name"]), string(d["widget"])
	}
	time.Sleep(5 * time.Second) // let the creates' echoes (feed, status) settle

	by0, api0 := apiRequests(t, e.widgets.Server)
	thr0 := throttledRequests(e.widgets.Server)
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ops.crossplane.io/v1alpha1",
		"kind":       "Operation",
		"metadata":   map[string]any{"name": op},
		"spec": map[string]any{"mode": "Pipeline", "pipeline": []any{map[string]any{
			"step":        "rotate",
			"functionRef": map[string]any{"name": platform.FunctionName},
			"input": map[string]any{
				"apiVersion":     "fn.widgetco.io/v1beta1",
				"kind":           "RotateKeys",
				"target":         map[string]any{"apiVersion": gvkXWidget.GroupVersion().String(), "kind": gvkXWidget.Kind, "namespace": opNamespace},
				"revokePrevious": true,
				"maxTargets":     int64(max(n, 1000)),
			},
		}}},
	}}
	start = time.Now()
	if err := e.kube.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	rotated, revoked, asked := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	lastErr := ""
	for len(revoked) < n {
		if time.Since(start) > 15*time.Minute {
			t.Fatalf("15 min after the Operation, %d of %d keys rotated and %d revoked (logs in %s)", len(rotated), n, len(revoked), filepath.Join(e.dir, "logs"))
		}
		if r.succeeded == 0 {
			if err := e.kube.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil {
				c := platform.GetCondition(o, "Succeeded")
				switch {
				case c.Status == "True":
					r.succeeded = time.Since(start)
				case c.Reason == "PipelineError" && c.Message != lastErr:
					// Core retries a failed pipeline: say so and wait on.
					lastErr = c.Message
					t.Logf("the Operation's pipeline failed (core retries it): %s", c.Message)
				}
			}
		}
		at := time.Now()
		if len(asked) < n {
			e.askedKeys(t, asked, at)
		}
		for name, d := range e.secrets(t) {
			k := string(d["key-0-name"])
			if k == "" || k == before[name] {
				continue
			}
			if _, ok := rotated[name]; !ok {
				rotated[name] = at
			}
			if _, ok := revoked[name]; !ok && len(d["key-0-previous"]) == 0 {
				revoked[name] = at
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, at := range rotated {
		r.rotated = append(r.rotated, at.Sub(start))
		r.rotateAll = max(r.rotateAll, at.Sub(start))
	}
	for _, at := range revoked {
		r.revokeAll = max(r.revokeAll, at.Sub(start))
	}
	if len(asked) < n {
		// Asked and revoked between one poll's two lists: asked by now.
		e.askedKeys(t, asked, time.Now())
	}
	for _, at := range asked {
		r.asked = append(r.asked, at.Sub(start))
		r.askAll = max(r.askAll, at.Sub(start))
	}
	if len(asked) < n {
		t.Errorf("every key was rotated, but only %d of %d WidgetKeys were seen holding the request", len(asked), n)
	}
	by1, api1 := apiRequests(t, e.widgets.Server)
	r.requests, r.throttled = api1-api0, throttledRequests(e.widgets.Server)-thr0
	perKey := []string{}
	for _, kv := range sortedKeysDesc(by1) {
		if d := kv.v - by0[kv.k]; d > 0 {
			perKey = append(perKey, fmt.Sprintf("%s %.2f", kv.k, d/float64(n)))
		}
	}
	r.perKey = strings.Join(perKey, ", ")
	if r.succeeded == 0 {
		t.Errorf("every key was rotated but the Operation is not Succeeded")
	}

	// Every widget holds exactly its new key: the Widget API's word, with
	// the provider's token (limited too: it waits out its 429s).
	api, err := widgetapi.New(e.widgets.URL, widgetapi.WithToken(e2eToken))
	if err != nil {
		t.Fatal(err)
	}
	now := e.secrets(t)
	names := make([]string, 0, len(now))
	for name := range now {
		names = append(names, name)
	}
	var wrong atomic.Int32
	parallel(len(names), 8, func(i int) {
		name := names[i]
		for {
			l, err := api.ListKeys(ctx, widgets[name])
			if d, ok := widgetapi.IsRateLimited(err); ok {
				time.Sleep(d)
				continue
			}
			if err != nil || len(l.Items) != 1 || l.Items[0].Name != string(now[name]["key-0-name"]) {
				wrong.Add(1)
			}
			return
		}
	})
	if wrong.Load() > 0 || len(names) != n {
		t.Errorf("%d of %d widgets do not hold exactly the key their connection Secret holds (%d Secrets)", wrong.Load(), n, len(names))
	}
	return r
}

// askedKeys records in asked when each WidgetKey of opNamespace was first
// seen holding a rotation request.
func (e *e2eEnv) askedKeys(t *testing.T, asked map[string]time.Time, at time.Time) {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvkWidgetKeyM.GroupVersion().WithKind(gvkWidgetKeyM.Kind + "List"))
	if err := e.kube.List(context.Background(), l, client.InNamespace(opNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, k := range l.Items {
		if _, ok := asked[k.GetName()]; ok {
			continue
		}
		if req, _, _ := unstructured.NestedString(k.Object, "spec", "forProvider", "rotation", "requestedAt"); req != "" {
			asked[k.GetName()] = at
		}
	}
}

// secrets returns the data of opNamespace's XWidget connection Secrets, by
// name.
func (e *e2eEnv) secrets(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	l := &corev1.SecretList{}
	if err := e.kube.List(context.Background(), l, client.InNamespace(opNamespace)); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]map[string][]byte, len(l.Items))
	for i := range l.Items {
		if strings.HasSuffix(l.Items[i].Name, "-connection") {
			out[l.Items[i].Name] = l.Items[i].Data
		}
	}
	return out
}
