package widgetkey

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestKeysWaitingFor(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	xr := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "platform.widgetco.io/v1alpha1", Kind: "XWidget", Name: "web", UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	nsKey := func(ns, name, uid, widget string) *nsv1beta1.WidgetKey {
		k := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: xr(uid)}}
		if widget != "" {
			k.Spec.ForProvider.WidgetName = ptr.To(widget)
		}
		return k
	}
	nsWidget := func(ns, uid, externalName string) *nsv1beta1.Widget {
		w := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-8k2mz", OwnerReferences: xr(uid)}}
		if externalName != "" {
			meta.SetExternalName(w, externalName)
		}
		return w
	}
	keys := []client.Object{
		nsKey("team-a", "web-key-0", "xr-1", ""),
		nsKey("team-a", "web-key-1", "xr-1", ""),
		nsKey("team-a", "web-key-2", "xr-1", "team-a-web-8k2mz"),
		nsKey("team-a", "api-key-0", "xr-2", ""),
		nsKey("team-b", "web-key-0", "xr-1", ""),
		&clusterv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Name: "web-key-0", OwnerReferences: xr("xr-3")}},
	}
	req := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}

	cases := map[string]struct {
		reason  string
		widget  client.Object
		newList func() resource.ManagedList
		want    []reconcile.Request
	}{
		"Named": {
			reason:  "A Widget with its external name requeues the keys of the same XR in its namespace that have no widget name yet.",
			widget:  nsWidget("team-a", "xr-1", "team-a-web-8k2mz"),
			newList: func() resource.ManagedList { return &nsv1beta1.WidgetKeyList{} },
			want:    []reconcile.Request{req("team-a", "web-key-0"), req("team-a", "web-key-1")},
		},
		"Unnamed": {
			reason:  "A Widget without an external name requeues nothing: its keys could not resolve it.",
			widget:  nsWidget("team-a", "xr-1", ""),
			newList: func() resource.ManagedList { return &nsv1beta1.WidgetKeyList{} },
		},
		"NoController": {
			reason:  "A Widget no XR composes has no keys composed with it.",
			widget:  &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Annotations: map[string]string{meta.AnnotationKeyExternalName: "web"}}},
			newList: func() resource.ManagedList { return &nsv1beta1.WidgetKeyList{} },
		},
		"ClusterScoped": {
			reason:  "A cluster-scoped Widget requeues the cluster-scoped keys of its XR.",
			widget:  &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "web-8k2mz", OwnerReferences: xr("xr-3"), Annotations: map[string]string{meta.AnnotationKeyExternalName: "web-8k2mz"}}},
			newList: func() resource.ManagedList { return &clusterv1beta1.WidgetKeyList{} },
			want:    []reconcile.Request{req("", "web-key-0")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(s).WithObjects(keys...).
				WithIndex(&nsv1beta1.WidgetKey{}, indexController, controllerUID).
				WithIndex(&clusterv1beta1.WidgetKey{}, indexController, controllerUID).
				Build()
			got := keysWaitingFor(kube, tc.newList)(t.Context(), tc.widget)
			sortReqs := cmpopts.SortSlices(func(a, b reconcile.Request) bool { return a.String() < b.String() })
			if diff := cmp.Diff(tc.want, got, sortReqs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nkeysWaitingFor(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	unnamed := &nsv1beta1.Widget{}
	withName := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{meta.AnnotationKeyExternalName: "web"}}}
	p := named()
	got := map[string]bool{
		"create named":     p.Create(event.CreateEvent{Object: withName}),
		"create unnamed":   p.Create(event.CreateEvent{Object: unnamed}),
		"update gets name": p.Update(event.UpdateEvent{ObjectOld: unnamed, ObjectNew: withName}),
		"update had name":  p.Update(event.UpdateEvent{ObjectOld: withName, ObjectNew: withName}),
		"delete":           p.Delete(event.DeleteEvent{Object: withName}),
	}
	want := map[string]bool{"create named": true, "update gets name": true}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(_ string, v bool) bool { return !v })); diff != "" {
		t.Errorf("which Widget events requeue waiting keys: -want, +got:\n%s", diff)
	}
}
