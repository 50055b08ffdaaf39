package config

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgetco/crossplane-widget/apis"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

// Contract tests: what unchangedSkipped (unchanged.go) assumes of
// crossplane-runtime v2.4.0's ProviderConfig reconciler, one test per
// assumption, run against the real reconciler with a mock client that logs
// its calls. docs/reconciler.md lists them with the layer each one pins.

// recount runs one recount of a ProviderConfig that has a finalizer and
// users already counted, with two usages, and returns the calls, what Get
// returned, what each write was given, and the usages as listed before and
// after the recount.
func recount(t *testing.T) (calls []string, read client.Object, written []client.Object, listed, after []nsv1alpha1.ProviderConfigUsage) {
	t.Helper()
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	pc := &nsv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default", ResourceVersion: "7",
		Finalizers: []string{"in-use.crossplane.io"}}}
	pc.Status.Users = 2
	usages := []nsv1alpha1.ProviderConfigUsage{*testUsage("u1"), *testUsage("u2")}
	var items *nsv1alpha1.ProviderConfigUsageList
	c := &test.MockClient{
		MockGet: func(_ context.Context, _ client.ObjectKey, o client.Object) error {
			calls = append(calls, "Get ProviderConfig")
			pc.DeepCopyInto(o.(*nsv1alpha1.ProviderConfig))
			o.GetObjectKind().SetGroupVersionKind(nsv1alpha1.ProviderConfigGroupVersionKind)
			read = o.DeepCopyObject().(client.Object)
			return nil
		},
		MockList: func(_ context.Context, l client.ObjectList, _ ...client.ListOption) error {
			calls = append(calls, "List ProviderConfigUsage")
			items = l.(*nsv1alpha1.ProviderConfigUsageList)
			items.Items = usages
			listed = append([]nsv1alpha1.ProviderConfigUsage{}, usages...)
			for i := range listed {
				listed[i] = *usages[i].DeepCopy()
			}
			return nil
		},
		MockUpdate: func(_ context.Context, o client.Object, _ ...client.UpdateOption) error {
			calls = append(calls, "Update ProviderConfig")
			written = append(written, o.DeepCopyObject().(client.Object))
			return nil
		},
		MockStatusUpdate: func(_ context.Context, o client.Object, _ ...client.SubResourceUpdateOption) error {
			calls = append(calls, "Status().Update ProviderConfig")
			written = append(written, o.DeepCopyObject().(client.Object))
			return nil
		},
	}
	r := providerconfig.NewReconciler(schemeManager{c: c, s: s}, resource.ProviderConfigKinds{
		Config: nsv1alpha1.ProviderConfigGroupVersionKind, Usage: nsv1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: nsv1alpha1.ProviderConfigUsageListGroupVersionKind,
	})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	return calls, read, written, listed, items.Items
}

func testUsage(name string) *nsv1alpha1.ProviderConfigUsage {
	u := usage("team-a", name, nsv1alpha1.ProviderConfigKind, "default")
	u.Labels = map[string]string{xpv2.LabelKeyProviderName: "default", xpv2.LabelKeyProviderKind: nsv1alpha1.ProviderConfigKind}
	u.OwnerReferences = []metav1.OwnerReference{{APIVersion: "widget.m.widgetco.io/v1beta1", Kind: "Widget", Name: name, UID: types.UID(name), Controller: ptr.To(true)}}
	return u
}

// TestRuntimeRecountReadsBeforeItWrites: unchangedSkipped remembers the
// ProviderConfig it last read and drops a write of an equal object. That
// needs the recount to read the ProviderConfig with Get before it writes
// it, and to write it with Update and Status().Update.
func TestRuntimeRecountReadsBeforeItWrites(t *testing.T) {
	calls, _, _, _, _ := recount(t)
	want := []string{"Get ProviderConfig", "List ProviderConfigUsage", "Update ProviderConfig", "Status().Update ProviderConfig"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("a recount: -want, +got:\n%s", diff)
	}
}

// TestRuntimeRecountWritesWhatItReadWhenNothingChanged: the writes of a
// recount that finds the finalizer there and the count unchanged carry
// the object as it was read, resource version included, so that
// unchangedSkipped recognises them (the 1,506 -> 634 ProviderConfig writes
// of notes/benchmarks-history.md rest on it).
func TestRuntimeRecountWritesWhatItReadWhenNothingChanged(t *testing.T) {
	_, read, written, _, _ := recount(t)
	for i, w := range written {
		if diff := cmp.Diff(read, w); diff != "" {
			t.Errorf("write %d: -read, +written:\n%s", i, diff)
		}
	}
}

// TestRuntimeRecountOnlyReadsItsUsages: unchangedSkipped lists usages
// without copying them out of the informer cache (UnsafeDisableDeepCopy).
// That is safe only while the recount does not change the listed objects.
func TestRuntimeRecountOnlyReadsItsUsages(t *testing.T) {
	_, _, _, listed, after := recount(t)
	if diff := cmp.Diff(listed, after); diff != "" {
		t.Errorf("the listed usages after the recount: -listed, +after:\n%s", diff)
	}
}
