//go:build linux

package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestRollingUpdate changes the provider's DeploymentRuntimeConfig, which
// core turns into a new pod template: the Deployment replaces its pods one
// at a time (RollingUpdate), each leader stops gracefully and hands its
// lease over, and claims created meanwhile go Ready. It measures the gap
// with no leader: from the last renewal of each holder to the next
// holder's acquisition, as the Lease records them.
func TestRollingUpdate(t *testing.T) {
	s := newScenario(t, false)
	kc := suite.c.Client()
	pkg := &pkgv1.Provider{}
	if err := kc.Get(t.Context(), types.NamespacedName{Name: platform.ProviderName}, pkg); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	if err := kc.Get(t.Context(), types.NamespacedName{Namespace: cluster.CrossplaneNamespace, Name: pkg.GetCurrentRevision()}, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("the provider's Deployment rolls out with %q, want RollingUpdate", dep.Spec.Strategy.Type)
	}
	gen := dep.Generation
	before := map[string]bool{}
	for _, p := range suite.provider.Pods() {
		before[p.Name()] = true
	}

	leases := watchLease(t, kc)
	drc := &pkgv1beta1.DeploymentRuntimeConfig{}
	if err := kc.Get(t.Context(), types.NamespacedName{Name: platform.ProviderRuntimeConfig}, drc); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"deploymentTemplate":{"spec":{"template":{"metadata":{"annotations":{"widgetco.io/restarted-at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `"}}}}}}}`)
	started := time.Now()
	if err := kc.Patch(t.Context(), drc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	xrs := s.createDuringFirstCommits(10)
	s.eventually("the provider's Deployment to roll out", func() error {
		d := &appsv1.Deployment{}
		if err := kc.Get(t.Context(), client.ObjectKeyFromObject(dep), d); err != nil {
			return err
		}
		if d.Generation == gen {
			return fmt.Errorf("the Deployment's generation is still %d", gen)
		}
		pods := &corev1.PodList{}
		if err := kc.List(t.Context(), pods, client.InNamespace(cluster.CrossplaneNamespace), client.MatchingLabels{"pkg.crossplane.io/provider": platform.ProviderName}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if before[p.Name] {
				return fmt.Errorf("old pod %s is still there", p.Name)
			}
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas || d.Status.AvailableReplicas != *d.Spec.Replicas {
			return fmt.Errorf("%d of %d replicas updated, %d available", d.Status.UpdatedReplicas, *d.Spec.Replicas, d.Status.AvailableReplicas)
		}
		return nil
	})
	t.Logf("MEASURED the rolling update replaced both provider pods %s after the DeploymentRuntimeConfig changed", time.Since(started).Round(100*time.Millisecond))
	s.eventually("a pod of the new template to hold the lease", func() error {
		if h := podOf(leaseHolder(s)); h == "" || before[h] {
			return fmt.Errorf("held by %q", h)
		}
		return nil
	})
	for _, xr := range xrs {
		s.waitReady(xr)
	}
	s.checkOneWidgetEach(xrs)
	handovers, worst := leases()
	if len(handovers) == 0 {
		t.Errorf("the lease never changed hands during the rolling update")
	}
	t.Logf("MEASURED %d lease handovers during the rolling update (%s); the longest gap with no leader %s", len(handovers), strings.Join(handovers, "; "), worst.Round(time.Millisecond))
	if worst > 15*time.Second {
		t.Errorf("a gap of %s with no leader: a replica that stops gracefully should hand its lease over at once, not let it expire (15s)", worst)
	}
}

// watchLease polls provider-widget's lease every 100ms until the returned
// function is called, which returns each handover ("old -> new after gap")
// and the longest gap: from the old holder's last renewal to the new
// holder's acquisition.
func watchLease(t *testing.T, kc client.Client) func() ([]string, time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	var handovers []string
	var worst time.Duration
	go func() {
		defer close(done)
		var last *coordinationv1.Lease
		for {
			l := &coordinationv1.Lease{}
			if err := kc.Get(t.Context(), types.NamespacedName{Namespace: cluster.CrossplaneNamespace, Name: platform.LeaseName}, l); err == nil {
				if last != nil && holder(l) != holder(last) && holder(l) != "" && l.Spec.AcquireTime != nil && last.Spec.RenewTime != nil {
					gap := l.Spec.AcquireTime.Sub(last.Spec.RenewTime.Time)
					gap = max(gap, 0)
					worst = max(worst, gap)
					handovers = append(handovers, fmt.Sprintf("%s -> %s after %s", podOf(holder(last)), podOf(holder(l)), gap.Round(time.Millisecond)))
				}
				if holder(l) != "" {
					last = l
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() ([]string, time.Duration) {
		close(stop)
		<-done
		return handovers, worst
	}
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func podOf(identity string) string {
	p, _, _ := strings.Cut(identity, "_")
	return p
}
