//go:build linux

package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// Timing of the rotation scenario. The overlap is the WidgetKey's minimum
// (5m): the scenario does not wait it out, it cuts each overlap short with
// spec.rotation.revokePreviousAt once the consumer has moved to the new key,
// as an operator would after a leak. That the overlap itself is honoured, to
// the second, is TestKeyRotationTimeline's (test/integration/provider, with
// a fake clock).
const (
	rotationOverlap = "5m"
	// rotationWait bounds the wait for one rotation, room for a slow,
	// shared machine.
	rotationWait = 5 * time.Minute
	// secretRefresh is how often the consumer re-reads the connection
	// Secret, as the kubelet refreshes a mounted Secret (about a minute
	// at worst): in between it keeps calling with the key it has.
	secretRefresh = 30 * time.Second
	// callEvery is how often the consumer calls the Widget API.
	callEvery = 250 * time.Millisecond
)

// TestRotationWithoutFailedCalls: an app team rotates its XWidget's key twice
// (spec.rotation.requestedAt) while a consumer keeps calling the Widget API
// with the key from the connection Secret, re-reading the Secret only every
// 30 s as a mounted Secret lags. Each replaced key stays valid during the
// overlap, so the consumer moves to the new key without a failed call; once
// it has, the team revokes the replaced key at once
// (spec.rotation.revokePreviousAt) rather than waiting out the overlap.
func TestRotationWithoutFailedCalls(t *testing.T) {
	s := newScenario(t, true)
	xr := s.xwidget("rotating", map[string]any{"keys": int64(1), "rotation": map[string]any{"overlap": rotationOverlap}})
	s.create(xr)
	s.waitReady(xr)
	secretName := xr.GetName() + "-connection"
	data := s.connectionSecret(s.ns, secretName, 1)
	widget, first := string(data["widget"]), string(data["key-0-name"])

	c := &consumer{s: s, secret: types.NamespacedName{Namespace: s.ns, Name: secretName}, widget: widget, used: map[string]bool{}}
	// The first call, with the original key, before any rotation.
	c.call(s.ctx)
	if c.calls.Load() != 1 || c.keyName != first {
		t.Fatalf("the consumer's first call: %d calls with key %q, want one with the original key %s", c.calls.Load(), c.keyName, first)
	}
	ctx, stop := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.run(ctx)
	}()
	stopped := false
	halt := func() {
		if !stopped {
			stop()
			wg.Wait()
			stopped = true
		}
	}
	defer halt()

	begin := time.Now()
	// Rotation 1, on request.
	asked := s.requestRotation(xr)
	r1 := s.waitKeyName(secretName, first, rotationWait)
	t.Logf("Rotation 1: key-0 %s replaced %s after %s", r1, first, time.Since(begin).Round(time.Second))
	s.eventually("the replaced key published as key-0-previous", func() error {
		d := s.secretData(secretName)
		if string(d["key-0-previous-name"]) != first || len(d["key-0-previous"]) == 0 {
			return errors.Errorf("key-0-previous-name %q", d["key-0-previous-name"])
		}
		return nil
	})
	t.Logf("Rotation 1: Secret %s holds %v during the overlap", secretName, dataKeys(s.secretData(secretName)))
	s.eventually("status.rotation.previousKeysRevokeAt", func() error {
		if err := s.get(xr); err != nil {
			return err
		}
		if nested(xr, "status", "rotation", "previousKeysRevokeAt") == "" {
			return errors.Errorf("status.rotation.previousKeysRevokeAt is not set; %s", notYet(xr))
		}
		return nil
	})
	t.Logf("Rotation 1: XWidget status.rotation.nextRotationAt %q, previousKeysRevokeAt %q", nested(xr, "status", "rotation", "nextRotationAt"), nested(xr, "status", "rotation", "previousKeysRevokeAt"))
	s.revokeOnceMoved(xr, c, widget, first, r1, asked)

	// Rotation 2: no overlap is running any more, so it starts at once.
	time.Sleep(2 * time.Second) // requestedAt counts in seconds; it must be later than r1's creation
	asked = s.requestRotation(xr)
	r2 := s.waitKeyName(secretName, r1, rotationWait)
	t.Logf("Rotation 2: key-0 %s replaced %s after %s", r2, r1, time.Since(begin).Round(time.Second))
	s.revokeOnceMoved(xr, c, widget, r1, r2, asked)
	// Keep calling a little longer with the current key.
	time.Sleep(5 * time.Second)
	halt()

	s.rejectedRotations(xr, secretName, widget)

	calls, failures := c.calls.Load(), c.failures.Load()
	used := c.keysUsed()
	t.Logf("MEASURED: %d calls, %d failed, with %d keys (%v) over %s; 2 rotations, each overlap cut short once the consumer moved, Secret re-read every %s",
		calls, failures, len(used), used, time.Since(begin).Round(time.Second), secretRefresh)
	if failures != 0 {
		t.Errorf("%d of %d calls failed during the rotations; first failures: %v", failures, calls, c.firstFailures())
	}
	if calls < 100 {
		t.Errorf("only %d calls: too few to say rotations cost no call", calls)
	}
	if len(used) < 3 {
		t.Errorf("the consumer called with keys %v: want the original key and both rotated keys", used)
	}
}

// revokeOnceMoved waits until the consumer calls with key next, then revokes
// the keys that existed when the rotation was asked for
// (spec.rotation.revokePreviousAt), and waits until key was is gone from the
// Widget API while next stays.
func (s *scenario) revokeOnceMoved(xr client.Object, c *consumer, widget, was, next, asked string) {
	s.t.Helper()
	s.eventually("the consumer calling with key "+next, func() error {
		if !slices.Contains(c.keysUsed(), next) {
			return errors.Errorf("it has called with %v", c.keysUsed())
		}
		return nil
	})
	s.mergePatch(xr, `{"spec":{"rotation":{"revokePreviousAt":"`+asked+`"}}}`)
	s.eventually("key "+was+" revoked before the end of its overlap", func() error {
		keys, err := s.keyNames(widget)
		if err != nil {
			return err
		}
		if slices.Contains(keys, was) || !slices.Contains(keys, next) {
			return errors.Errorf("keys %v", keys)
		}
		return nil
	})
}

// rejectedRotations asks for rotations the platform cannot honour: one the
// XRD refuses at admission, one the policy refuses (a period below its
// minimum). Neither changes a key.
func (s *scenario) rejectedRotations(xr *unstructured.Unstructured, secret, widget string) {
	s.t.Helper()
	before, err := s.keyNames(widget)
	if err != nil {
		s.t.Fatal(err)
	}
	current := string(s.secretData(secret)["key-0-name"])

	err = suite.kube.Patch(s.ctx, xr, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"rotation":{"period":"2h","overlap":"3h"}}}`)))
	s.t.Logf("Rejected at admission: %v", err)
	if err == nil || !strings.Contains(err.Error(), "overlap must be shorter than period") {
		s.t.Errorf("an overlap longer than the period: want a refusal from the XRD, got %v", err)
	}

	s.mergePatch(xr, `{"spec":{"rotation":{"period":"24h"}}}`)
	c := s.condition(xr, "PolicyCompliant", func(c platform.Condition) bool { return c.Reason == "PolicyViolation" })
	s.t.Logf("Rejected by the policy: PolicyCompliant=%s (%s): %s", c.Status, c.Reason, c.Message)
	if !strings.Contains(c.Message, "spec.rotation.period") {
		s.t.Errorf("the refusal does not name spec.rotation.period: %s", c.Message)
	}
	time.Sleep(5 * time.Second) // a reconcile or two: nothing may move
	after, err := s.keyNames(widget)
	if err != nil {
		s.t.Fatal(err)
	}
	if !slices.Equal(before, after) || string(s.secretData(secret)["key-0-name"]) != current {
		s.t.Errorf("a rejected rotation changed the keys: %v -> %v, Secret key-0 %s -> %s", before, after, current, s.secretData(secret)["key-0-name"])
	}
	s.mergePatch(xr, `{"spec":{"rotation":{"period":null}}}`)
	s.condition(xr, "PolicyCompliant", func(c platform.Condition) bool { return c.Reason == "Compliant" })
}

// dataKeys returns the keys of a Secret's data, sorted: never its values.
func dataKeys(d map[string][]byte) []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// requestRotation asks for a rotation of xr's keys now, and returns the time
// it asked for (RFC 3339).
func (s *scenario) requestRotation(xr client.Object) string {
	s.t.Helper()
	at := time.Now().UTC().Format(time.RFC3339)
	s.mergePatch(xr, `{"spec":{"rotation":{"requestedAt":"`+at+`"}}}`)
	return at
}

// secretData returns the data of the Secret name in the scenario's
// namespace, or nil.
func (s *scenario) secretData(name string) map[string][]byte {
	sec := &corev1.Secret{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: s.ns, Name: name}, sec); err != nil {
		return nil
	}
	return sec.Data
}

// waitKeyName waits up to timeout for the Secret's key-0-name to be other
// than was, and returns it.
func (s *scenario) waitKeyName(secret, was string, timeout time.Duration) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	var now string
	err := wait.Poll(ctx, time.Second, func(context.Context) (bool, error) {
		now = string(s.secretData(secret)["key-0-name"])
		return now != "" && now != was, nil
	})
	if err != nil {
		s.t.Fatalf("key-0 of Secret %s is still %s after %s: %v", secret, was, timeout, err)
	}
	return now
}

// A consumer calls the Widget API with key-0 of a connection Secret, which
// it re-reads every secretRefresh, and counts the calls that fail.
type consumer struct {
	s      *scenario
	secret types.NamespacedName
	widget string

	calls, failures atomic.Int64

	mu       sync.Mutex
	used     map[string]bool
	failed   []string
	key      []byte
	keyName  string
	readWhen time.Time
}

func (c *consumer) run(ctx context.Context) {
	t := time.NewTicker(callEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.call(ctx)
	}
}

// call makes one call, re-reading the Secret first when it is due.
func (c *consumer) call(ctx context.Context) {
	if time.Since(c.readWhen) >= secretRefresh || c.key == nil {
		sec := &corev1.Secret{}
		if err := suite.kube.Get(ctx, c.secret, sec); err == nil && len(sec.Data["key-0"]) > 0 {
			c.key, c.keyName, c.readWhen = sec.Data["key-0"], string(sec.Data["key-0-name"]), time.Now()
		}
	}
	if c.key == nil {
		return
	}
	k, err := suite.api.VerifyKey(ctx, c.widget, string(c.key))
	if ctx.Err() != nil {
		// Stopped mid-call: not the key's fault.
		return
	}
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used[c.keyName] = true
	if err != nil || k.Name != c.keyName {
		c.failures.Add(1)
		if len(c.failed) < 5 {
			// The key's name, never its secret.
			c.failed = append(c.failed, fmt.Sprintf("%s with key %s: %v", time.Now().UTC().Format(time.RFC3339), c.keyName, err))
		}
	}
}

func (c *consumer) keysUsed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.used))
	for k := range c.used {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (c *consumer) firstFailures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.failed...)
}
