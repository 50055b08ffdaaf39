package provider_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
)

// leaseName is the provider's leader election Lease (LeaderElectionID).
const leaseName = "crossplane-leader-election-provider-widget"

// TestLeaderHandsOverLeaseOnSIGTERM: a leader that stops cleanly (a
// rolling update, a scale down, a node drain) releases its lease, so the
// standby leads within seconds rather than after --lease-duration (60s),
// and reconciles.
func TestLeaderHandsOverLeaseOnSIGTERM(t *testing.T) {
	const leaseDuration = 60 * time.Second
	e := newEnv(t)
	e.providerConfig()
	args := []string{"--leader-election", "--leader-election-namespace", e.ns, "--lease-duration", "60s"}
	replicas := []*provider{startProvider(t, args...), startProvider(t, args...)}

	var leader, standby *provider
	e.eventually(2*leaseDuration, "one provider replica leads", func() (bool, string) {
		leading := []*provider{}
		for _, p := range replicas {
			if p.metric("leader_election_master_status", map[string]string{"name": leaseName}) == 1 {
				leading = append(leading, p)
			}
		}
		if len(leading) != 1 {
			return false, fmt.Sprintf("%d replicas report leading", len(leading))
		}
		leader, standby = leading[0], replicas[0]
		if standby == leader {
			standby = replicas[1]
		}
		return e.leaseHolder() != "", "the Lease has no holder"
	})
	holder := e.leaseHolder()

	sent := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- leader.Stop() }() // SIGTERM; SIGKILL after 10s
	var took time.Duration
	// Waits past the lease duration, so that the figure is measured
	// without the release too.
	e.eventually(leaseDuration+30*time.Second, "another replica holds the Lease", func() (bool, string) {
		h := e.leaseHolder()
		took = time.Since(sent)
		return h != "" && h != holder, fmt.Sprintf("holder %q (the stopped leader was %q)", h, holder)
	})
	t.Logf("MEASURED lease handover after SIGTERM: %.1fs (lease duration 60s)", took.Seconds())
	if took > 15*time.Second {
		t.Errorf("the standby took the lease %s after the leader's SIGTERM, want within 15s: the leader did not release it", took.Round(100*time.Millisecond))
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := leader.Err(); err != nil {
		t.Errorf("the leader did not exit cleanly on SIGTERM: %v", err)
	}
	if got := standby.metric("leader_election_master_status", map[string]string{"name": leaseName}); got != 1 {
		t.Errorf("the standby's leader_election_master_status is %v, want 1", got)
	}

	e.widget("after-handover")
	e.waitReady("after-handover")
}

// leaseHolder is the holder identity of the provider's Lease in the test's
// namespace, or "" when it has none (or does not exist yet).
func (e *env) leaseHolder() string {
	l := &coordinationv1.Lease{}
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: leaseName}, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
