package config

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/debounce"
)

func usage(ns, name, kind, pc string) *nsv1alpha1.ProviderConfigUsage {
	return &nsv1alpha1.ProviderConfigUsage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		TypedProviderConfigUsage: xpv2.TypedProviderConfigUsage{
			ProviderConfigReference: xpv2.ProviderConfigReference{Kind: kind, Name: pc},
		},
	}
}

// drain returns what the queue holds now, without blocking.
func drain(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []reconcile.Request {
	var got []reconcile.Request
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		got = append(got, r)
	}
	return got
}

func TestDebouncedUsageHandler(t *testing.T) {
	cases := map[string]struct {
		kind   string
		events []*nsv1alpha1.ProviderConfigUsage
		want   []reconcile.Request
	}{
		"ProviderConfigOnlySeesItsOwnUsages": {
			kind: nsv1alpha1.ProviderConfigKind,
			events: []*nsv1alpha1.ProviderConfigUsage{
				usage("team-a", "u1", "ProviderConfig", "default"),
				usage("team-a", "u2", "ClusterProviderConfig", "shared"),
			},
			want: []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "default"}}},
		},
		"ClusterProviderConfigIsClusterScoped": {
			kind: nsv1alpha1.ClusterProviderConfigKind,
			events: []*nsv1alpha1.ProviderConfigUsage{
				usage("team-a", "u1", "ProviderConfig", "default"),
				usage("team-a", "u2", "ClusterProviderConfig", "shared"),
				usage("team-b", "u3", "ClusterProviderConfig", "shared"),
			},
			want: []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "shared"}}},
		},
		"ABurstIsOneRecount": {
			kind: nsv1alpha1.ProviderConfigKind,
			events: []*nsv1alpha1.ProviderConfigUsage{
				usage("team-a", "u1", "ProviderConfig", "default"),
				usage("team-a", "u2", "ProviderConfig", "default"),
				usage("team-a", "u3", "ProviderConfig", "default"),
				usage("team-b", "u4", "ProviderConfig", "default"),
			},
			want: []reconcile.Request{
				{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "default"}},
				{NamespacedName: types.NamespacedName{Namespace: "team-b", Name: "default"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Now())
			q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
				workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock})
			defer q.ShutDown()
			h := debounce.Handler(&resource.EnqueueRequestForProviderConfig{Kind: tc.kind}, UsageDebounce)
			for _, u := range tc.events {
				h.Create(context.Background(), event.CreateEvent{Object: u}, q)
			}
			if got := drain(q); len(got) != 0 {
				t.Fatalf("enqueued before the debounce elapsed: %v", got)
			}
			clock.Step(UsageDebounce)
			var got []reconcile.Request
			for deadline := time.Now().Add(5 * time.Second); len(got) < len(tc.want) && time.Now().Before(deadline); {
				got = append(got, drain(q)...)
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // anything more would be a duplicate
			got = append(got, drain(q)...)
			less := func(a, b reconcile.Request) bool { return a.String() < b.String() }
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(less)); diff != "" {
				t.Errorf("enqueued requests: -want, +got:\n%s", diff)
			}
		})
	}
}
