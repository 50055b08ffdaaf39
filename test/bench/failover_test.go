//go:build linux

package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

func init() { register(50, "failover", failoverSection) }

// The provider's leader election timing in the failover section: the e2e
// suite's, a quarter of the defaults (60s, 50s, 2s).
const (
	failoverLease   = 15 * time.Second
	failoverRenew   = 10 * time.Second
	failoverNS      = "bench-failover"
	failoverTimeout = 5 * time.Minute
)

// A failover is one SIGKILL of the leading provider replica.
type failover struct {
	takeover time.Duration // until another identity holds the lease
	ready    time.Duration // until a claim created just after the kill is Ready
}

// failoverSection kills the leading provider replica (SIGKILL) repeatedly on
// the real one-node cluster, with the shipped DeploymentRuntimeConfig (two
// replicas, leader election), and measures how long until another replica
// leads and until a claim created right after the kill is Ready.
func failoverSection(t *testing.T, b *bench) string {
	runs := envInt("WIDGET_BENCH_FAILOVER_RUNS", 5)
	env := startE2E(t, b, "--lease-duration="+failoverLease.String(), "--renew-deadline="+failoverRenew.String())
	defer env.stop()
	ctx := t.Context()
	if err := platform.EnsureNamespace(ctx, env.c.Client(), failoverNS); err != nil {
		t.Fatal(err)
	}
	claim := env.claimMaker(t)
	warm := env.warmUp(ctx, t, claim(failoverNS, "warm-up"))
	t.Logf("failover: warm-up claim Ready in %s", warm.Round(10*time.Millisecond))

	fs := make([]failover, 0, runs)
	for i := range runs {
		f, err := env.failOver(ctx, claim(failoverNS, fmt.Sprintf("after-kill-%d", i)))
		if err != nil {
			t.Fatalf("failover %d: %v (logs in %s/logs)", i+1, err, env.dir)
		}
		t.Logf("failover %d: new leader after %s, claim Ready after %s", i+1, f.takeover.Round(10*time.Millisecond), f.ready.Round(10*time.Millisecond))
		fs = append(fs, f)
	}
	return failoverMarkdown(fs)
}

// failOver kills the leader, creates c, and waits for a new leader and for
// c to be Ready; then for both replicas to be ready again.
func (e *e2eEnv) failOver(ctx context.Context, c *unstructured.Unstructured) (failover, error) {
	var f failover
	leader, err := e.leader(ctx)
	if err != nil {
		return f, err
	}
	holder := e.leaseHolder(ctx)
	if err := leader.Kill(); err != nil { //nolint:contextcheck // Kill takes no context: it bounds its own lookup (30s)
		return f, err
	}
	killed := time.Now()
	if err := e.kube.Create(ctx, c); err != nil {
		return f, err
	}
	deadline := killed.Add(failoverTimeout)
	for f.takeover == 0 || f.ready == 0 {
		if time.Now().After(deadline) {
			return f, fmt.Errorf("no new leader or claim %s not Ready after %s", c.GetName(), failoverTimeout)
		}
		if h := e.leaseHolder(ctx); f.takeover == 0 && h != "" && h != holder {
			f.takeover = time.Since(killed)
		}
		if f.ready == 0 {
			if err := e.kube.Get(ctx, client.ObjectKeyFromObject(c), c); err == nil && claimReady(c) {
				f.ready = time.Since(killed)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for !allReady(e) { //nolint:contextcheck // Pods takes no context: it bounds its own List (30s)
		if time.Now().After(deadline) {
			return f, fmt.Errorf("the provider's replicas are not ready again after %s", failoverTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return f, nil
}

func allReady(e *e2eEnv) bool {
	pods := e.provider.Pods()
	for _, p := range pods {
		if !p.Ready() {
			return false
		}
	}
	return len(pods) == 2
}

func failoverMarkdown(fs []failover) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	take := make([]time.Duration, 0, len(fs))
	ready := make([]time.Duration, 0, len(fs))
	for _, f := range fs {
		take = append(take, f.takeover)
		ready = append(ready, f.ready)
	}
	w("## Provider leader failover\n\n")
	w("provider-widget as `examples/runtime` runs it (two replicas, `--leader-election`) on the real one-node\n")
	w("cluster, with `--lease-duration=%s --renew-deadline=%s` (the e2e suite's; the defaults are 60s and 50s)\n", failoverLease, failoverRenew)
	w("and `--retry-period=2s`. Each run sends SIGKILL to the leading replica's container, creates a claim at\n")
	w("once, and measures until another identity holds the lease and until that claim is Ready; then it waits for\n")
	w("both replicas to be ready again (kubelet restarts the killed container). %d runs, load average %s.\n\n", len(fs), loadAvg())
	w("| | median | min | max |\n|---|---:|---:|---:|\n")
	w("| new leader after the kill | %s | %s | %s |\n", secs(medianD(take)), secs(quantile(take, 0)), secs(quantile(take, 1)))
	w("| claim created at the kill Ready | %s | %s | %s |\n\n", secs(medianD(ready)), secs(quantile(ready, 0)), secs(quantile(ready, 1)))
	w("A standby takes over only once the dead leader's lease has expired: `--lease-duration` after the leader's\n")
	w("last renewal (at most a `--retry-period` before the kill), noticed at the standby's next try (every\n")
	w("`--retry-period`, which client-go jitters by up to 20%%).\n\n")
	return b.String()
}
