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

// A failover is one SIGKILL of the leading provider replica's container,
// or one deletion of its pod.
type failover struct {
	deleted  bool          // the pod was deleted, not its container killed
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

	// Each run kills the leader's container, then deletes the leader's
	// pod: a crash, and a pod that stops cleanly (a drain, a rollout).
	fs := make([]failover, 0, 2*runs)
	for i := range 2 * runs {
		deleted := i%2 == 1
		f, err := env.failOver(ctx, claim(failoverNS, fmt.Sprintf("after-failover-%d", i)), deleted)
		if err != nil {
			t.Fatalf("failover %d: %v (logs in %s/logs)", i+1, err, env.dir)
		}
		t.Logf("failover %d (pod deleted %t): new leader after %s, claim Ready after %s", i+1, deleted, f.takeover.Round(10*time.Millisecond), f.ready.Round(10*time.Millisecond))
		fs = append(fs, f)
	}
	return failoverMarkdown(fs)
}

// failOver kills the leader's container (or deletes its pod), creates c,
// and waits for a new leader and for c to be Ready; then for both
// replicas to be ready again.
func (e *e2eEnv) failOver(ctx context.Context, c *unstructured.Unstructured, deletePod bool) (failover, error) {
	f := failover{deleted: deletePod}
	leader, err := e.leader(ctx)
	if err != nil {
		return f, err
	}
	holder := e.leaseHolder(ctx)
	if deletePod {
		err = e.kube.Delete(ctx, leader.Object())
	} else {
		err = leader.Kill() //nolint:contextcheck // Kill takes no context: it bounds its own lookup (30s)
	}
	if err != nil {
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
	var take, ready [2][]time.Duration // by failover.deleted
	for _, f := range fs {
		i := 0
		if f.deleted {
			i = 1
		}
		take[i] = append(take[i], f.takeover)
		ready[i] = append(ready[i], f.ready)
	}
	w("## Provider leader failover\n\n")
	w("provider-widget as `examples/runtime` runs it (two replicas, `--leader-election`) on the real one-node\n")
	w("cluster, with `--lease-duration=%s --renew-deadline=%s` (the e2e suite's; the defaults are 60s and 50s)\n", failoverLease, failoverRenew)
	w("and `--retry-period=2s`. Each run either sends SIGKILL to the leading replica's container (a crash) or deletes\n")
	w("its pod (a drain or a rollout: kubelet stops it with SIGTERM), creates a claim at once, and measures until\n")
	w("another identity holds the lease and until that claim is Ready; then it waits for both replicas to be ready\n")
	w("again. The two ways alternate, %d runs each, load average %s.\n\n", len(take[0]), loadAvg())
	w("| | median | min | max |\n|---|---:|---:|---:|\n")
	for i, how := range []string{"container killed", "pod deleted"} {
		if len(take[i]) == 0 {
			continue
		}
		w("| %s: new leader | %s | %s | %s |\n", how, secs(medianD(take[i])), secs(quantile(take[i], 0)), secs(quantile(take[i], 1)))
		w("| %s: claim created at once Ready | %s | %s | %s |\n", how, secs(medianD(ready[i])), secs(quantile(ready[i], 0)), secs(quantile(ready[i], 1)))
	}
	w("\nA killed leader keeps its lease until it expires: `--lease-duration` after its last renewal (at most a\n")
	w("`--retry-period` before the kill), noticed at a standby's next try (every `--retry-period`, which client-go\n")
	w("jitters by up to 20%%). A leader that stops cleanly releases its lease as it exits\n")
	w("(`LeaderElectionReleaseOnCancel`), and a standby takes it at its next try.\n\n")
	return b.String()
}
