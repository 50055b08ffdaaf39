package kube

import (
	"context"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestPackageRunning(t *testing.T) {
	const ns, rev = "crossplane-system", "provider-widget-abc"
	healthy := xpv2.Condition{Type: pkgv1.TypeHealthy, Status: corev1.ConditionTrue, Reason: "HealthyPackageRevision"}
	provider := func(c xpv2.Condition) *pkgv1.Provider {
		p := &pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "provider-widget"}}
		p.SetCurrentRevision(rev)
		p.SetConditions(c)
		return p
	}
	revision := func(source string, conds ...xpv2.Condition) *pkgv1.ProviderRevision {
		r := &pkgv1.ProviderRevision{ObjectMeta: metav1.ObjectMeta{Name: rev}}
		r.SetSource(source)
		r.SetRuntimeConfigRef(&pkgv1.RuntimeConfigReference{Name: "provider-widget"})
		r.SetConditions(conds...)
		return r
	}
	revHealthy := []xpv2.Condition{
		{Type: pkgv1.TypeRevisionHealthy, Status: corev1.ConditionTrue, Reason: "HealthyPackageRevision"},
		{Type: pkgv1.TypeRuntimeHealthy, Status: corev1.ConditionTrue, Reason: "HealthyPackageRevision"},
	}
	deployment := func(ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rev},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
			Status:     appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: ready, AvailableReplicas: ready},
		}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"pkg.crossplane.io/provider": "provider-widget"}}}
	}
	cases := map[string]struct {
		objs        []client.Object
		source      string
		wantRunning bool
		wantWhy     string
	}{
		"Running": {
			objs:        []client.Object{provider(healthy), revision("reg/provider:v1", revHealthy...), deployment(2), pod(rev + "-x1"), pod(rev + "-x2")},
			source:      "reg/provider:v1",
			wantRunning: true,
		},
		"NotInstalled": {
			wantWhy: `providers.pkg.crossplane.io "provider-widget" not found`,
		},
		"Unhealthy": {
			objs:    []client.Object{provider(xpv2.Condition{Type: pkgv1.TypeHealthy, Status: corev1.ConditionFalse, Message: "pulling"})},
			wantWhy: "Healthy=False pulling",
		},
		"OldSource": {
			objs:    []client.Object{provider(healthy), revision("reg/provider:v0", revHealthy...)},
			source:  "reg/provider:v1",
			wantWhy: "revision provider-widget-abc is of reg/provider:v0, not reg/provider:v1 yet",
		},
		"RuntimeUnhealthy": {
			objs:    []client.Object{provider(healthy), revision("reg/provider:v1", revHealthy[0])},
			wantWhy: "revision provider-widget-abc RuntimeHealthy=Unknown ",
		},
		"ReplicaNotReady": {
			objs:    []client.Object{provider(healthy), revision("reg/provider:v1", revHealthy...), deployment(1)},
			wantWhy: "Deployment provider-widget-abc: 2 of 2 replicas updated, 1 ready, 1 available",
		},
		"OldRevisionPodLeft": {
			objs:    []client.Object{provider(healthy), revision("reg/provider:v1", revHealthy...), deployment(2), pod(rev + "-x1"), pod("provider-widget-old-y1")},
			wantWhy: "pod provider-widget-old-y1 of another revision still runs",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(CrossplaneScheme()).WithObjects(tc.objs...).Build()
			p := &pkgv1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "provider-widget"}}
			running, why := PackageRunning(context.Background(), c, ns, p, tc.source, "provider-widget")
			if diff := cmp.Diff(tc.wantRunning, running); diff != "" {
				t.Errorf("running: -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWhy, why); diff != "" {
				t.Errorf("why: -want +got:\n%s", diff)
			}
		})
	}
}
