package provider_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// testClock is the time of one test's provider and Widget API server: real
// time, moved forward by the test. The server reads it directly; the
// provider reads the offset from a file (--test-clock-file).
type testClock struct {
	t    *testing.T
	file string
	off  atomic.Int64
}

func newTestClock(t *testing.T) *testClock {
	return &testClock{t: t, file: filepath.Join(t.TempDir(), "clock")}
}

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// advance moves both clocks forward by d.
func (c *testClock) advance(d time.Duration) {
	c.t.Helper()
	off := time.Duration(c.off.Add(int64(d)))
	if err := os.WriteFile(c.file, []byte(off.String()), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testClock) serverOpts(o *server.Options) { o.Now = c.now }

// rotatingEnv is a namespace with a ProviderConfig, a Ready widget "rw" and a
// provider that polls every poll on the test's clock.
func rotatingEnv(t *testing.T, poll string, opts ...apitest.Option) (*env, *testClock, *provider) {
	t.Helper()
	c := newTestClock(t)
	e := newEnv(t, append([]apitest.Option{apitest.WithOptions(c.serverOpts)}, opts...)...)
	e.providerConfig()
	// A short poll stands in for the wake-up at the next rotation, which
	// is scheduled by the real clock.
	p := startProvider(t, "--test-clock-file", c.file, "--poll-interval", poll, "--poll-jitter", "100ms")
	e.widget("rw")
	e.waitReady("rw")
	return e, c, p
}

// rotatingKey creates a WidgetKey "name" of widget rw that rotates every
// period with overlap, writing the Secret "<name>-conn".
func (e *env) rotatingKey(name string, period, overlap time.Duration) {
	k := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	k.Spec.ForProvider.WidgetNameRef = &xpv2.NamespacedReference{Name: "rw"}
	k.Spec.ForProvider.Rotation = &commonv1beta1.KeyRotation{Overlap: metav1.Duration{Duration: overlap}}
	if period > 0 {
		k.Spec.ForProvider.Rotation.Period = &metav1.Duration{Duration: period}
	}
	k.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	k.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: name + "-conn"}
	e.create(k)
}

// connSecret returns the connection Secret's data, or nil.
func (e *env) connSecret(name string) map[string][]byte {
	s := &corev1.Secret{}
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name + "-conn"}, s); err != nil {
		return nil
	}
	return s.Data
}

// secretSays describes what the Secret names: "key=<name>" and
// "previousKey=<name>" for each entry with a secret.
func secretSays(d map[string][]byte) string {
	out := []string{}
	if len(d["key"]) > 0 {
		out = append(out, "key="+string(d["keyName"]))
	}
	if len(d["previousKey"]) > 0 {
		out = append(out, "previousKey="+string(d["previousKeyName"]))
	}
	return strings.Join(out, " ")
}

// apiKeys returns the names of widget rw's keys, or nil when the API
// cannot say (it may be rate limiting the test's token too).
func (e *env) apiKeys() []string {
	e.t.Helper()
	l, err := e.client().ListKeys(e.ctx(), defaultName(e.ns, "rw"))
	if err != nil {
		e.t.Logf("cannot list keys: %v", err)
		return nil
	}
	out := []string{}
	for _, k := range l.Items {
		out = append(out, k.Name)
	}
	slices.Sort(out)
	return out
}

// waitState waits until the Secret says secret and the API holds exactly
// keys, checking on every poll that the Secret's key is a key the API has.
func (e *env) waitState(name, what, secret string, keys []string) {
	e.t.Helper()
	e.eventually(60*time.Second, what, func() (bool, string) {
		d := e.connSecret(name)
		got, have := secretSays(d), e.apiKeys()
		if d != nil && have != nil && !slices.Contains(have, string(d["keyName"])) {
			e.t.Errorf("%s: the connection Secret's key %s is not in the API (keys %v)", what, d["keyName"], have)
		}
		return got == secret && slices.Equal(have, keys), fmt.Sprintf("Secret %q, API keys %v", got, have)
	})
}

func (e *env) getKey(name string) *nsv1beta1.WidgetKey {
	e.t.Helper()
	k := &nsv1beta1.WidgetKey{}
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, k); err != nil {
		e.t.Fatal(err)
	}
	return k
}

// eventReasons returns the reasons of the namespace's events, in no order.
func (e *env) eventReasons() map[string]int {
	l := &corev1.EventList{}
	_ = e.kube.List(e.ctx(), l, client.InNamespace(e.ns))
	out := map[string]int{}
	for _, ev := range l.Items {
		out[ev.Reason] += int(max(ev.Count, 1))
	}
	return out
}

// noSecretsOutside fails if a key secret the Secret held is in the log, an
// event or the WidgetKey.
func (e *env) noSecretsOutside(p *provider, name string, secrets ...[]byte) {
	e.t.Helper()
	evs := &corev1.EventList{}
	_ = e.kube.List(e.ctx(), evs, client.InNamespace(e.ns))
	k := fmt.Sprintf("%+v", e.getKey(name))
	logs := p.logs()
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		if strings.Contains(logs, string(s)) {
			e.t.Errorf("the provider log holds a key secret")
		}
		if strings.Contains(k, string(s)) {
			e.t.Errorf("the WidgetKey holds a key secret")
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, string(s)) {
				e.t.Errorf("event %s holds a key secret", ev.Reason)
			}
		}
	}
}

// TestKeyRotationTimeline: a key is rotated when its period is over, the
// connection Secret holding both keys, and the previous key is revoked once
// the overlap is over; the status and the events say so.
func TestKeyRotationTimeline(t *testing.T) {
	e, c, p := rotatingEnv(t, "2s")
	e.rotatingKey("app", 24*time.Hour, time.Hour)
	base := defaultName(e.ns, "app")
	e.waitState("app", "the first key", "key="+base, []string{base})
	first := e.connSecret("app")["key"]

	c.advance(24 * time.Hour)
	start := time.Now()
	e.waitState("app", "the rotation", "key="+base+"-r1 previousKey="+base, []string{base, base + "-r1"})
	rotated := time.Since(start)
	if got := e.connSecret("app")["previousKey"]; string(got) != string(first) {
		t.Errorf("previousKey is not the first key's secret")
	}
	e.eventually(30*time.Second, "the status to show both keys", func() (bool, string) {
		o := e.getKey("app").Status.AtProvider
		ok := o.Name == base+"-r1" && o.CreatedAt != nil && o.NextRotationAt != nil && o.Previous != nil && o.Previous.Name == base && o.Previous.RevokeAt != nil
		return ok, fmt.Sprintf("%+v", o)
	})
	o := e.getKey("app").Status.AtProvider
	if d := o.Previous.RevokeAt.Sub(o.CreatedAt.Time); d != time.Hour {
		t.Errorf("status: previous key revoked %s after the new key's creation, want the overlap (1h)", d)
	}
	if d := o.NextRotationAt.Sub(o.CreatedAt.Time); d != 24*time.Hour {
		t.Errorf("status: next rotation %s after the new key's creation, want the period (24h)", d)
	}

	c.advance(time.Hour)
	start = time.Now()
	e.waitState("app", "the previous key's revocation", "key="+base+"-r1", []string{base + "-r1"})
	revoked := time.Since(start)
	t.Logf("MEASURED (poll 2s): rotation done %s after it was due; previous key revoked %s after its overlap ended", rotated.Round(time.Millisecond), revoked.Round(time.Millisecond))
	e.eventually(30*time.Second, "one KeyRotated and one PreviousKeyRevoked event", func() (bool, string) {
		r := e.eventReasons()
		return r["KeyRotated"] == 1 && r["PreviousKeyRevoked"] == 1, fmt.Sprintf("events %v", r)
	})
	e.noSecretsOutside(p, "app", first, e.connSecret("app")["key"])
}

// TestKeyRotateNow: setting requestedAt rotates at once, and only once.
func TestKeyRotateNow(t *testing.T) {
	e, c, _ := rotatingEnv(t, "2s")
	e.rotatingKey("now", 720*time.Hour, time.Hour)
	base := defaultName(e.ns, "now")
	e.waitState("now", "the first key", "key="+base, []string{base})

	k := &nsv1beta1.WidgetKey{}
	req := metav1.NewTime(c.now().Add(time.Second).Truncate(time.Second))
	if err := e.update(k, "now", func() { k.Spec.ForProvider.Rotation.RequestedAt = &req }); err != nil {
		t.Fatal(err)
	}
	e.waitState("now", "the rotation on request", "key="+base+"-r1 previousKey="+base, []string{base, base + "-r1"})
	e.eventually(30*time.Second, "the status to record the request", func() (bool, string) {
		got := e.getKey("now").Status.AtProvider.RotationRequestedAt
		return got != nil && got.Equal(&req), fmt.Sprintf("rotationRequestedAt %v", got)
	})
	c.advance(2 * time.Hour)
	e.waitState("now", "the previous key's revocation", "key="+base+"-r1", []string{base + "-r1"})
	time.Sleep(5 * time.Second) // a couple of polls: no second rotation
	if got := e.apiKeys(); !slices.Equal(got, []string{base + "-r1"}) {
		t.Errorf("keys after the request was honoured: %v, want only %s-r1", got, base)
	}
}

// TestKeyRotateNowRevokePrevious: "rotate now: it leaked". requestedAt and
// revokePreviousAt set to the same time replace the key and revoke the
// leaked one without waiting for the overlap; the Secret's key is valid at
// every step.
func TestKeyRotateNowRevokePrevious(t *testing.T) {
	e, c, _ := rotatingEnv(t, "2s")
	e.rotatingKey("leak", 720*time.Hour, 24*time.Hour)
	base := defaultName(e.ns, "leak")
	e.waitState("leak", "the first key", "key="+base, []string{base})

	k := &nsv1beta1.WidgetKey{}
	now := metav1.NewTime(c.now().Add(time.Second).Truncate(time.Second))
	if err := e.update(k, "leak", func() {
		k.Spec.ForProvider.Rotation.RequestedAt = &now
		k.Spec.ForProvider.Rotation.RevokePreviousAt = &now
	}); err != nil {
		t.Fatal(err)
	}
	// No clock advance: the 24h overlap is cut short by the request.
	e.waitState("leak", "the rotation and the leaked key's revocation", "key="+base+"-r1", []string{base + "-r1"})
	e.eventually(30*time.Second, "one KeyRotated and one PreviousKeyRevoked event", func() (bool, string) {
		r := e.eventReasons()
		return r["KeyRotated"] == 1 && r["PreviousKeyRevoked"] == 1, fmt.Sprintf("events %v", r)
	})

	// Left in place, revokePreviousAt does not shorten the next rotation's
	// overlap: the key it now names as previous was created after it.
	later := metav1.NewTime(c.now().Add(time.Second).Truncate(time.Second))
	if err := e.update(k, "leak", func() { k.Spec.ForProvider.Rotation.RequestedAt = &later }); err != nil {
		t.Fatal(err)
	}
	e.waitState("leak", "the next rotation, with its overlap", "key="+base+"-r2 previousKey="+base+"-r1", []string{base + "-r1", base + "-r2"})
	time.Sleep(5 * time.Second) // a couple of polls: the previous key stays
	if got := e.apiKeys(); !slices.Equal(got, []string{base + "-r1", base + "-r2"}) {
		t.Errorf("keys during the second rotation's overlap: %v, want %s-r1 and %s-r2", got, base, base)
	}
}

// TestKeyRotationCrashAfterCreate: the provider dies after the Widget API
// created the new key and before the Secret was written. The Secret keeps
// its valid key; the restarted provider revokes the unused key and rotates
// again.
func TestKeyRotationCrashAfterCreate(t *testing.T) {
	e, c, p := rotatingEnv(t, "2s")
	e.rotatingKey("crash", 24*time.Hour, time.Hour)
	base := defaultName(e.ns, "crash")
	e.waitState("crash", "the first key", "key="+base, []string{base})

	e.api.Server.SetFaults(server.Faults{HoldWriteResponse: time.Minute})
	c.advance(24 * time.Hour)
	var lost string
	e.eventually(60*time.Second, "the API to create the rotated key", func() (bool, string) {
		k, err := e.client().GetKey(e.ctx(), defaultName(e.ns, "rw"), base+"-r1")
		if err == nil {
			lost = k.ID
		}
		return err == nil, fmt.Sprint(err)
	})
	p.kill()
	if got := secretSays(e.connSecret("crash")); got != "key="+base {
		t.Fatalf("the crash did not land between the create and the Secret write: Secret %q", got)
	}
	e.api.Server.SetFaults(server.Faults{})
	startProvider(t, "--test-clock-file", c.file, "--poll-interval", "2s", "--poll-jitter", "100ms")
	e.waitState("crash", "the rotation after the restart", "key="+base+"-r1 previousKey="+base, []string{base, base + "-r1"})
	k, err := e.client().GetKey(e.ctx(), defaultName(e.ns, "rw"), base+"-r1")
	if err != nil || k.ID == lost {
		t.Errorf("the rotated key after the restart: %v, ID %s; want a new key, not the one whose secret was lost (%s)", err, k.ID, lost)
	}
	e.eventually(30*time.Second, "an UnusedKeyRevoked event", func() (bool, string) {
		r := e.eventReasons()
		return r["UnusedKeyRevoked"] >= 1, fmt.Sprintf("events %v", r)
	})
}

// TestKeyRotationCrashAfterRevoke: the provider dies after the Widget API
// revoked the previous key and before the Secret dropped it. The Secret's
// key stays valid; the restarted provider drops the previous key's entries.
func TestKeyRotationCrashAfterRevoke(t *testing.T) {
	e, c, p := rotatingEnv(t, "2s")
	e.rotatingKey("crash2", 24*time.Hour, time.Hour)
	base := defaultName(e.ns, "crash2")
	e.waitState("crash2", "the first key", "key="+base, []string{base})
	c.advance(24 * time.Hour)
	e.waitState("crash2", "the rotation", "key="+base+"-r1 previousKey="+base, []string{base, base + "-r1"})

	e.api.Server.SetFaults(server.Faults{HoldWriteResponse: time.Minute})
	c.advance(time.Hour)
	e.eventually(60*time.Second, "the API to revoke the previous key", func() (bool, string) {
		keys := e.apiKeys()
		return slices.Equal(keys, []string{base + "-r1"}), fmt.Sprintf("keys %v", keys)
	})
	p.kill()
	if got := secretSays(e.connSecret("crash2")); got != "key="+base+"-r1 previousKey="+base {
		t.Fatalf("the crash did not land between the revoke and the Secret write: Secret %q", got)
	}
	e.api.Server.SetFaults(server.Faults{})
	startProvider(t, "--test-clock-file", c.file, "--poll-interval", "2s", "--poll-jitter", "100ms")
	e.waitState("crash2", "the Secret without the revoked key", "key="+base+"-r1", []string{base + "-r1"})
}

// TestKeyRotationRateLimited: keys due at once against a Widget API that
// answers 429 all rotate, and every Secret keeps a valid key throughout.
func TestKeyRotationRateLimited(t *testing.T) {
	// Polls every 20 s leave room under the limit for the rotations; the
	// rotations themselves (a list, a read and a create each, at once)
	// exceed it.
	e, c, _ := rotatingEnv(t, "20s", apitest.WithOptions(func(o *server.Options) { o.RateLimit = 2; o.RateBurst = 3 }))
	const n = 4
	for i := range n {
		e.rotatingKey(fmt.Sprintf("rl-%d", i), 24*time.Hour, time.Hour)
	}
	for i := range n {
		name := fmt.Sprintf("rl-%d", i)
		e.eventually(120*time.Second, name+"'s first key", func() (bool, string) {
			d := e.connSecret(name)
			return len(d["key"]) > 0, secretSays(d)
		})
	}
	throttled := func() float64 {
		mfs, _ := e.api.Server.Registry().Gather()
		for _, mf := range mfs {
			if mf.GetName() == "widgetapi_throttled_requests_total" {
				var s float64
				for _, m := range mf.GetMetric() {
					s += m.GetCounter().GetValue()
				}
				return s
			}
		}
		return 0
	}
	before := throttled()
	// The rotation is requested rather than reached by moving the clock:
	// the reference server's rate limiter refills when its clock jumps.
	req := metav1.NewTime(c.now().Add(time.Second).Truncate(time.Second))
	for i := range n {
		k := &nsv1beta1.WidgetKey{}
		if err := e.update(k, fmt.Sprintf("rl-%d", i), func() { k.Spec.ForProvider.Rotation.RequestedAt = ptr.To(req) }); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("rl-%d", i)
		base := defaultName(e.ns, name)
		e.eventually(180*time.Second, name+"'s rotation", func() (bool, string) {
			d := e.connSecret(name)
			return secretSays(d) == "key="+base+"-r1 previousKey="+base, secretSays(d)
		})
	}
	t.Logf("MEASURED %d keys rotated on request under a 2 req/s limit (burst 3): %s, %.0f requests answered 429", n, time.Since(start).Round(time.Millisecond), throttled()-before)
	if throttled() == before {
		t.Errorf("no request was answered 429: the test does not test rotation under a rate limit")
	}
	e.eventually(30*time.Second, "the previous key and the new one of each WidgetKey", func() (bool, string) {
		keys := e.apiKeys()
		return len(keys) == 2*n, fmt.Sprintf("%d keys: %v", len(keys), keys)
	})
}
