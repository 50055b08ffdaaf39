package config

import (
	"context"
	"fmt"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgetco/crossplane-widget/apis"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

// schemeManager is a manager with only a client and a scheme, which is all
// crossplane-runtime's ProviderConfig reconciler takes from one.
type schemeManager struct {
	ctrl.Manager
	c client.Client
	s *runtime.Scheme
}

func (m schemeManager) GetClient() client.Client   { return m.c }
func (m schemeManager) GetScheme() *runtime.Scheme { return m.s }

// TestRecountWritesOnlyChanges runs crossplane-runtime's ProviderConfig
// reconciler through the client that skips unchanged writes, recount after
// recount, and counts the writes the API server sees.
func TestRecountWritesOnlyChanges(t *testing.T) {
	type step struct {
		// usages is how many usages of the ProviderConfig exist before
		// the recount.
		usages int
		// deleting marks the ProviderConfig deleted before the recount.
		deleting bool
		// want are the writes the recount sends ("update", "status"),
		// and wantUsers the users in the status afterwards.
		want      []string
		wantUsers int64
	}
	cases := map[string]struct {
		reason string
		skip   bool
		steps  []step
	}{
		"Skipping": {
			reason: "A recount that changes nothing writes nothing; one that changes the count writes only the status.",
			skip:   true,
			steps: []step{
				{usages: 1, want: []string{"update", "status"}, wantUsers: 1},
				{usages: 1, wantUsers: 1},
				{usages: 1, wantUsers: 1},
				{usages: 3, want: []string{"status"}, wantUsers: 3},
				{usages: 3, wantUsers: 3},
			},
		},
		"WithoutSkipping": {
			reason: "crossplane-runtime's reconciler alone writes the ProviderConfig and its status at every recount (what the skipping is measured against).",
			steps: []step{
				{usages: 1, want: []string{"update", "status"}, wantUsers: 1},
				{usages: 1, want: []string{"update", "status"}, wantUsers: 1},
			},
		},
		"DeletionStillWrites": {
			reason: "A ProviderConfig deleted while in use reports it in its status once; once unused, its finalizer is removed.",
			skip:   true,
			steps: []step{
				{usages: 2, want: []string{"update", "status"}, wantUsers: 2},
				{usages: 2, deleting: true, want: []string{"status"}, wantUsers: 2},
				{usages: 2, deleting: true, wantUsers: 2},
				{usages: 0, deleting: true, want: []string{"update"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := runtime.NewScheme()
			if err := apis.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			pc := &nsv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"}}
			var writes []string
			copied := 0 // usage lists that copied the cached usages
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(pc).WithStatusSubresource(pc).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
					if err := c.Get(ctx, key, o, opts...); err != nil {
						return err
					}
					// As the informer cache does: the reconciler
					// selects usages by the object's kind.
					o.GetObjectKind().SetGroupVersionKind(nsv1alpha1.ProviderConfigGroupVersionKind)
					return nil
				},
				List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					lo := &client.ListOptions{}
					lo.ApplyOptions(opts)
					if lo.UnsafeDisableDeepCopy == nil || !*lo.UnsafeDisableDeepCopy {
						copied++
					}
					return c.List(ctx, l, opts...)
				},
				Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
					writes = append(writes, "update")
					return c.Update(ctx, o, opts...)
				},
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
					writes = append(writes, sub)
					return c.SubResource(sub).Update(ctx, o, opts...)
				},
			}).Build()
			var c client.Client = api
			if tc.skip {
				c = newUnchangedSkipped(api)
			}
			r := providerconfig.NewReconciler(schemeManager{c: c, s: s}, resource.ProviderConfigKinds{
				Config: nsv1alpha1.ProviderConfigGroupVersionKind, Usage: nsv1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: nsv1alpha1.ProviderConfigUsageListGroupVersionKind,
			})
			key := types.NamespacedName{Namespace: pc.Namespace, Name: pc.Name}
			made := 0
			for i, st := range tc.steps {
				setUsages(t, api, pc, &made, st.usages)
				if st.deleting {
					markDeleted(t, api, key)
				}
				writes, copied = nil, 0
				if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
					t.Fatalf("step %d: Reconcile(...): %v", i, err)
				}
				if tc.skip && copied > 0 {
					t.Errorf("%s\nstep %d: %d list(s) of usages copied the cache's objects, want none", tc.reason, i, copied)
				}
				if diff := cmp.Diff(st.want, writes); diff != "" {
					t.Errorf("%s\nstep %d: writes: -want, +got:\n%s", tc.reason, i, diff)
				}
				got := &nsv1alpha1.ProviderConfig{}
				if err := api.Get(ctx, key, got); err != nil {
					continue // Gone: its finalizer was removed.
				}
				if got.Status.Users != st.wantUsers {
					t.Errorf("%s\nstep %d: status.users %d, want %d", tc.reason, i, got.Status.Users, st.wantUsers)
				}
			}
		})
	}
}

// setUsages makes the usages of pc number n, creating or deleting them; made
// counts those ever created, for their names.
func setUsages(t *testing.T, c client.Client, pc *nsv1alpha1.ProviderConfig, made *int, n int) {
	t.Helper()
	ctx := context.Background()
	l := &nsv1alpha1.ProviderConfigUsageList{}
	if err := c.List(ctx, l, client.InNamespace(pc.Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := len(l.Items); i > n; i-- {
		if err := c.Delete(ctx, &l.Items[i-1]); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(l.Items); i < n; i++ {
		*made++
		u := usage(pc.Namespace, fmt.Sprintf("u%d", *made), nsv1alpha1.ProviderConfigKind, pc.Name)
		u.Labels = map[string]string{xpv2.LabelKeyProviderName: pc.Name, xpv2.LabelKeyProviderKind: nsv1alpha1.ProviderConfigKind}
		u.OwnerReferences = []metav1.OwnerReference{{APIVersion: "widget.m.widgetco.io/v1beta1", Kind: "Widget", Name: u.Name, UID: types.UID(u.Name), Controller: ptr.To(true)}}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
}

// markDeleted deletes the ProviderConfig, which its finalizer keeps.
func markDeleted(t *testing.T, c client.Client, key types.NamespacedName) {
	t.Helper()
	pc := &nsv1alpha1.ProviderConfig{}
	if err := c.Get(context.Background(), key, pc); err != nil {
		t.Fatal(err)
	}
	if pc.GetDeletionTimestamp() != nil {
		return
	}
	if err := c.Delete(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
}
