package provider_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// repairLatency changes the widget behind the provider's back and returns how
// long it took until the API shows it repaired.
func repairLatency(t *testing.T, e *env, name string, size string) time.Duration {
	t.Helper()
	if _, err := e.client().PatchWidget(e.ctx(), name, widgetapi.PatchWidgetRequest{Size: ptr.To(size), Labels: &map[string]string{"team": "hacked"}}); err != nil {
		t.Fatal(err)
	}
	return e.eventually(90*time.Second, "the out-of-band change to be repaired", func() (bool, string) {
		w, err := e.client().GetWidget(e.ctx(), name)
		if err != nil {
			return false, err.Error()
		}
		return w.Size == "medium" && w.Labels["team"] == "a", fmt.Sprintf("size %s labels %v", w.Size, w.Labels)
	})
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// TestDriftRepairWithChangeFeed: an out-of-band change is repaired within
// seconds through the change feed, although the poll interval is an hour;
// the repair is visible as an event and a metric.
func TestDriftRepairWithChangeFeed(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	p := startProvider(t, "--poll-interval", "1h")
	e.widget("drifty")
	e.waitReady("drifty")
	name := defaultName(e.ns, "drifty")
	ds := make([]time.Duration, 0, 5)
	for i := range 5 {
		d := repairLatency(t, e, name, []string{"large", "small"}[i%2])
		ds = append(ds, d)
		e.waitReady("drifty") // the repair's resize finishes before the next change
	}
	t.Logf("MEASURED drift repair latency with the change feed (poll 1h, 5 changes): median %s, all %v", median(ds), ds)

	e.eventually(30*time.Second, "a DriftRepaired event", func() (bool, string) {
		l := &corev1.EventList{}
		if err := e.kube.List(e.ctx(), l, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		for _, ev := range l.Items {
			if ev.Reason == "DriftRepaired" && strings.Contains(ev.Message, `size: want "medium"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none DriftRepaired", len(l.Items))
	})
	if got := p.metric("widget_updates_total", map[string]string{"cause": "drift", "kind": "Widget.widget.m.widgetco.io"}); got < 5 {
		t.Errorf("widget_updates_total{cause=drift} = %v, want >= 5", got)
	}
	if got := p.metric("widget_feed_enqueues_total", nil); got < 5 {
		t.Errorf("widget_feed_enqueues_total = %v, want >= 5 (repairs must come from the feed)", got)
	}
}

// TestDriftRepairPollingOnly: without the change feed the poll interval is
// the repair latency.
func TestDriftRepairPollingOnly(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t, "--no-change-feed", "--poll-interval", "5s", "--poll-jitter", "1s")
	e.widget("polled")
	e.waitReady("polled")
	ds := make([]time.Duration, 0, 5)
	for i := range 3 {
		ds = append(ds, repairLatency(t, e, defaultName(e.ns, "polled"), []string{"large", "small"}[i%2]))
		e.waitReady("polled")
	}
	t.Logf("MEASURED drift repair latency polling only (poll 5s +-1s, 3 changes): median %s, all %v", median(ds), ds)
}

// TestWidgetKeyConnectionSecret: a key's secret lands in its connection
// Secret - and nowhere else - together with the widget's endpoint.
func TestWidgetKeyConnectionSecret(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	p := startProvider(t)
	e.widget("keyed")
	k := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "ci"}}
	k.Spec.ForProvider.WidgetNameRef = &xpv2.NamespacedReference{Name: "keyed"}
	k.Spec.InitProvider.Description = ptr.To("ci pipeline")
	k.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	k.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "ci-key"}
	e.create(k)

	var s corev1.Secret
	e.eventually(60*time.Second, "the connection Secret with key and endpoint", func() (bool, string) {
		if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "ci-key"}, &s); err != nil {
			return false, err.Error()
		}
		return len(s.Data["key"]) > 0 && len(s.Data["endpoint"]) > 0, fmt.Sprintf("keys %v", keysOf(s.Data))
	})
	secret := string(s.Data["key"])
	if !strings.HasPrefix(secret, "wks_") || string(s.Data["widget"]) != defaultName(e.ns, "keyed") || string(s.Data["keyName"]) != defaultName(e.ns, "ci") {
		t.Errorf("connection Secret: key %d chars, widget %q, keyName %q", len(secret), s.Data["widget"], s.Data["keyName"])
	}
	if key, err := e.client().GetKey(e.ctx(), defaultName(e.ns, "keyed"), defaultName(e.ns, "ci")); err != nil {
		t.Errorf("key not in the API: %v", err)
	} else if key.Description != "ci pipeline" {
		t.Errorf("key description %q, want spec.initProvider's %q", key.Description, "ci pipeline")
	}

	// The secret appears nowhere else: not in logs, events, or the MR.
	if strings.Contains(p.logs(), secret) {
		t.Errorf("the provider log contains the key secret")
	}
	evs := &corev1.EventList{}
	_ = e.kube.List(e.ctx(), evs, client.InNamespace(e.ns))
	for _, ev := range evs.Items {
		if strings.Contains(ev.Message, secret) {
			t.Errorf("event %s contains the key secret", ev.Name)
		}
	}
	cur := &nsv1beta1.WidgetKey{}
	_ = e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "ci"}, cur)
	if strings.Contains(fmt.Sprintf("%+v", cur), secret) {
		t.Errorf("the WidgetKey object contains the key secret")
	}

	// A reconcile soon after the last reads the connection Secret from
	// the provider's memory of its own write (the poll interval here is
	// 1m, so for 30 s), and keeps the key.
	const saved = "widget_connection_secret_reads_saved_total"
	before := p.metric(saved, map[string]string{"kind": "WidgetKey.widget.m.widgetco.io"})
	// The provider may still be writing the resource (its status): the
	// change is retried on a conflict, as any client's would be.
	if err := e.update(cur, "ci", func() { meta.AddAnnotations(cur, map[string]string{"example.org/touched": "yes"}) }); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "a reconcile that reads the connection Secret from memory", func() (bool, string) {
		n := p.metric(saved, map[string]string{"kind": "WidgetKey.widget.m.widgetco.io"})
		return n > before, fmt.Sprintf("%s %v (before the change: %v)", saved, n, before)
	})
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "ci-key"}, &s); err != nil || string(s.Data["key"]) != secret {
		t.Errorf("the connection Secret's key changed after a reconcile (error %v)", err)
	}
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "ci"}, cur); err != nil {
		t.Fatal(err)
	}

	if err := e.kube.Delete(e.ctx(), cur); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the key to be revoked", func() (bool, string) {
		_, err := e.client().GetKey(e.ctx(), defaultName(e.ns, "keyed"), defaultName(e.ns, "ci"))
		return widgetapi.IsNotFound(err), fmt.Sprint(err)
	})
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRateLimitStormIsBounded: when the API throttles, the provider backs off
// for Retry-After instead of retrying in a storm, and everything still gets
// Ready.
func TestRateLimitStormIsBounded(t *testing.T) {
	e := newEnv(t, apitest.WithOptions(func(o *server.Options) { o.RateLimit = 2; o.RateBurst = 2 }))
	e.providerConfig()
	startProvider(t)
	const n = 8
	start := time.Now()
	for i := range n {
		e.widget(fmt.Sprintf("storm-%d", i))
	}
	for i := range n {
		e.waitReady(fmt.Sprintf("storm-%d", i))
	}
	elapsed := time.Since(start)
	reg := e.api.Server.Registry()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total, throttled float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "widgetapi_requests_total":
				total += m.GetCounter().GetValue()
			case "widgetapi_throttled_requests_total":
				throttled += m.GetCounter().GetValue()
			}
		}
	}
	rate := total / elapsed.Seconds()
	t.Logf("MEASURED %d widgets under a 2 req/s limit: Ready in %s, %0.f requests (%0.f answered 429), %.1f req/s", n, elapsed.Round(time.Millisecond), total, throttled, rate)
	// Without honouring Retry-After, ten workers retrying with 1s+ backoff
	// would send several times the limit; with it, the offered rate stays
	// near what the server accepts.
	if rate > 3*2 {
		t.Errorf("offered %.1f req/s against a 2 req/s limit: the provider is not backing off", rate)
	}
}

// TestCrashBetweenCreateAndAnnotation: the provider dies after the API created
// the widget but before it recorded the result. On restart it finds the
// widget (deterministic name, ownership marker): exactly one widget, and the
// resource becomes Ready instead of sticking in external-create-pending.
func TestCrashBetweenCreateAndAnnotation(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	e.api.Server.SetFaults(server.Faults{HoldWriteResponse: time.Minute})
	p := startProvider(t)
	e.widget("crashy")
	name := defaultName(e.ns, "crashy")
	e.eventually(60*time.Second, "the API to create the widget", func() (bool, string) {
		_, err := e.client().GetWidget(e.ctx(), name)
		return err == nil, fmt.Sprint(err)
	})
	p.kill()
	mg := e.getWidget("crashy")
	if !meta.ExternalCreateIncomplete(mg) {
		t.Fatalf("the crash did not land between create and annotation: annotations %v", mg.GetAnnotations())
	}
	e.api.Server.SetFaults(server.Faults{})

	startProvider(t)
	e.waitReady("crashy")
	if n := e.countWidgets(); n != 1 {
		t.Errorf("%d widgets after the crash and restart, want exactly 1", n)
	}
}

// TestCrashBetweenKeyCreateAndSecret: a key whose secret was never saved is
// revoked and re-created, so the connection Secret ends up with a working
// secret and the widget with exactly one key of that name.
func TestCrashBetweenKeyCreateAndSecret(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	p := startProvider(t)
	e.widget("kw")
	e.waitReady("kw")
	e.api.Server.SetFaults(server.Faults{HoldWriteResponse: time.Minute})
	k := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lost"}}
	k.Spec.ForProvider.WidgetName = ptr.To(defaultName(e.ns, "kw"))
	k.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	k.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "lost-key"}
	e.create(k)
	var first *widgetapi.Key
	e.eventually(60*time.Second, "the API to create the key", func() (bool, string) {
		var err error
		first, err = e.client().GetKey(e.ctx(), defaultName(e.ns, "kw"), defaultName(e.ns, "lost"))
		return err == nil, fmt.Sprint(err)
	})
	p.kill()
	e.api.Server.SetFaults(server.Faults{})
	startProvider(t)

	e.eventually(60*time.Second, "a connection Secret with a key", func() (bool, string) {
		s := &corev1.Secret{}
		err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "lost-key"}, s)
		if kerrors.IsNotFound(err) {
			return false, "no Secret yet"
		}
		return err == nil && len(s.Data["key"]) > 0, fmt.Sprint(err)
	})
	keys, err := e.client().ListKeys(e.ctx(), defaultName(e.ns, "kw"))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.Items) != 1 || keys.Items[0].ID == first.ID {
		t.Errorf("keys after recovery: %+v; want one, re-created (not the lost %s)", keys.Items, first.ID)
	}
}
