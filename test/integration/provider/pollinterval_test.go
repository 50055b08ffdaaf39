package provider_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestAnnotatedPollIntervalKeepsRevocation: WidgetKeys that ask, by the
// crossplane.io/poll-interval annotation, for a poll far shorter than the
// provider's jitter (1s against the default tenth of --poll-interval=10m)
// still have their previous key revoked when its overlap ends: neither the
// poll nor the wake-up at the revocation is ever dropped.
func TestAnnotatedPollIntervalKeepsRevocation(t *testing.T) {
	const keys = 5
	c := newTestClock(t)
	e := newEnv(t, apitest.WithOptions(c.serverOpts))
	e.providerConfig()
	// Not rotatingEnv: its short poll and jitter would hide the finding.
	startProvider(t, "--test-clock-file", c.file, "--poll-interval", "10m")
	e.widget("rw")
	e.waitReady("rw")

	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%d", i)
		e.rotatingKey(names[i], 24*time.Hour, time.Hour)
		e.annotateKey(names[i], meta.AnnotationKeyPollInterval, "1s")
	}
	for _, n := range names {
		e.waitSecret(n, "its first key", "key="+defaultName(e.ns, n))
	}

	// A rotation is due; a foreign annotation has each key reconciled
	// against the new time (the wake-up was scheduled by the old one).
	c.advance(24 * time.Hour)
	for _, n := range names {
		e.annotateKey(n, "example.com/touch", "rotate")
	}
	for _, n := range names {
		base := defaultName(e.ns, n)
		e.waitSecret(n, "its rotation", "key="+base+"-r1 previousKey="+base)
	}

	// 20 seconds before the overlaps end (by the provider's clock), nothing
	// but the keys' own polls and wake-ups reconciles them.
	c.advance(time.Hour - 20*time.Second)
	due := map[string]time.Time{}
	for _, n := range names {
		k := e.getKey(n)
		p := k.Status.AtProvider.Previous
		if p == nil || p.RevokeAt == nil {
			e.eventually(30*time.Second, n+" status to show the previous key", func() (bool, string) {
				k = e.getKey(n)
				p = k.Status.AtProvider.Previous
				return p != nil && p.RevokeAt != nil, fmt.Sprintf("%+v", k.Status.AtProvider)
			})
		}
		due[n] = time.Now().Add(p.RevokeAt.Sub(c.now()))
	}
	late := []time.Duration{}
	for _, n := range names {
		e.waitSecret(n, "its previous key's revocation", "key="+defaultName(e.ns, n)+"-r1")
		late = append(late, time.Until(due[n])*-1)
	}
	want := []string{}
	for _, n := range names {
		want = append(want, defaultName(e.ns, n)+"-r1")
	}
	slices.Sort(want)
	if got := e.apiKeys(); !slices.Equal(got, want) {
		t.Errorf("the Widget API holds keys %v, want only the rotated ones %v", got, want)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	t.Logf("MEASURED: %d WidgetKeys annotated 1s (jitter 1m): previous keys revoked %s to %s after their overlap ended (median %s)",
		keys, late[0].Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond), late[len(late)/2].Round(time.Millisecond))
}

// annotateKey sets the annotation k to v on WidgetKey name.
func (e *env) annotateKey(name, k, v string) {
	e.t.Helper()
	key := &nsv1beta1.WidgetKey{}
	if err := e.update(key, name, func() { meta.AddAnnotations(key, map[string]string{k: v}) }); err != nil {
		e.t.Fatalf("cannot annotate WidgetKey %s: %v", name, err)
	}
}

// waitSecret waits until WidgetKey name's connection Secret says secret
// (see secretSays), for at most 45 seconds.
func (e *env) waitSecret(name, what, secret string) {
	e.t.Helper()
	e.eventually(45*time.Second, name+": "+what, func() (bool, string) {
		got := secretSays(e.connSecret(name))
		return got == secret, fmt.Sprintf("Secret %q", got)
	})
}
