package cachetrim

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

var t0 = metav1.NewTime(time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC))

func objectMeta(i int) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              fmt.Sprintf("w-%05d", i),
		Namespace:         "team-a",
		UID:               types.UID(fmt.Sprintf("6b1f7c7e-0000-4000-8000-%012d", i)),
		ResourceVersion:   fmt.Sprint(100000 + i),
		Generation:        2,
		CreationTimestamp: t0,
		Labels:            map[string]string{"crossplane.io/composite": fmt.Sprintf("x-%05d", i)},
		Annotations: map[string]string{
			"crossplane.io/external-name":             fmt.Sprintf("w-%05d-3b9c3243e40e", i),
			"crossplane.io/external-create-pending":   "2026-11-26T04:00:00Z",
			"crossplane.io/external-create-succeeded": "2026-11-26T04:00:01Z",
		},
		Finalizers:      []string{"finalizer.managedresource.crossplane.io"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "platform.widgetco.io/v1alpha1", Kind: "XWidget", Name: fmt.Sprintf("x-%05d", i), UID: "7c2e", Controller: ptr.To(true)}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "crossplane", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1"}},
	}
}

func status() xpv2.ManagedResourceStatus {
	return xpv2.ManagedResourceStatus{ConditionedStatus: xpv2.ConditionedStatus{Conditions: []xpv2.Condition{
		{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, LastTransitionTime: t0, ObservedGeneration: 2},
		{Type: xpv2.TypeSynced, Status: corev1.ConditionTrue, Reason: xpv2.ReasonReconcileSuccess, LastTransitionTime: t0, ObservedGeneration: 2},
	}}}
}

func widgetParameters() commonv1beta1.WidgetParameters {
	return commonv1beta1.WidgetParameters{Size: ptr.To("small"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")}
}

func observation(i int) commonv1beta1.WidgetObservation {
	return commonv1beta1.WidgetObservation{ID: fmt.Sprint(i), State: commonv1beta1.WidgetState("Ready"), Endpoint: "https://w.example", Generation: 1, Size: "small", Region: "us-east-1",
		Labels: map[string]string{"team": "a", "widgetco.io/owner": fmt.Sprintf("n_team-a.w-%05d", i)}, CreatedAt: &t0}
}

func nsWidget(i int) *nsv1beta1.Widget {
	w := &nsv1beta1.Widget{ObjectMeta: objectMeta(i)}
	w.SetGroupVersionKind(nsv1beta1.SchemeGroupVersion.WithKind("Widget"))
	w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Name: "default", Kind: "ClusterProviderConfig"}
	w.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
	w.Spec.ForProvider = widgetParameters()
	w.Spec.InitProvider = commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")}
	w.Status.ManagedResourceStatus = status()
	w.Status.AtProvider = observation(i)
	return w
}

func clusterWidget(i int) *clusterv1beta1.Widget {
	w := &clusterv1beta1.Widget{ObjectMeta: objectMeta(i)}
	w.Namespace = ""
	w.SetGroupVersionKind(clusterv1beta1.SchemeGroupVersion.WithKind("Widget"))
	w.Spec.ProviderConfigReference = &xpv2.Reference{Name: "default"}
	w.Spec.DeletionPolicy = xpv2.DeletionDelete
	w.Spec.ForProvider = widgetParameters()
	w.Status.ManagedResourceStatus = status()
	w.Status.AtProvider = observation(i)
	return w
}

func nsKey(i int) *nsv1beta1.WidgetKey {
	k := &nsv1beta1.WidgetKey{ObjectMeta: objectMeta(i)}
	k.SetGroupVersionKind(nsv1beta1.SchemeGroupVersion.WithKind("WidgetKey"))
	k.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Name: "default", Kind: "ClusterProviderConfig"}
	k.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "key-0"}
	k.Spec.ForProvider.WidgetName = ptr.To("w")
	k.Status.ManagedResourceStatus = status()
	return k
}

func clusterKey(i int) *clusterv1beta1.WidgetKey {
	k := &clusterv1beta1.WidgetKey{ObjectMeta: objectMeta(i)}
	k.Namespace = ""
	k.SetGroupVersionKind(clusterv1beta1.SchemeGroupVersion.WithKind("WidgetKey"))
	k.Spec.ProviderConfigReference = &xpv2.Reference{Name: "default"}
	k.Status.ManagedResourceStatus = status()
	return k
}

func nsUsage(i int) *nsv1alpha1.ProviderConfigUsage {
	u := &nsv1alpha1.ProviderConfigUsage{ObjectMeta: objectMeta(i)}
	u.SetGroupVersionKind(nsv1alpha1.SchemeGroupVersion.WithKind("ProviderConfigUsage"))
	u.Annotations, u.Finalizers = nil, nil
	u.Labels = map[string]string{xpv2.LabelKeyProviderName: "default", xpv2.LabelKeyProviderKind: "ClusterProviderConfig"}
	u.ProviderConfigReference = xpv2.ProviderConfigReference{Name: "default", Kind: "ClusterProviderConfig"}
	u.ResourceReference = xpv2.TypedReference{APIVersion: "widget.m.widgetco.io/v1beta1", Kind: "Widget", Name: u.Name}
	return u
}

func clusterUsage(i int) *clusterv1alpha1.ProviderConfigUsage {
	u := &clusterv1alpha1.ProviderConfigUsage{ObjectMeta: objectMeta(i)}
	u.Namespace = ""
	u.SetGroupVersionKind(clusterv1alpha1.SchemeGroupVersion.WithKind("ProviderConfigUsage"))
	u.Labels = map[string]string{xpv2.LabelKeyProviderName: "default"}
	u.ProviderConfigReference = xpv2.Reference{Name: "default"}
	u.ResourceReference = xpv2.TypedReference{APIVersion: "widget.widgetco.io/v1beta1", Kind: "Widget", Name: u.Name}
	return u
}

func TestTransformKeepsObjects(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     client.Object
	}{
		"NamespacedWidget":  {reason: "A namespaced Widget keeps every field but its managed fields.", in: nsWidget(1)},
		"ClusterWidget":     {reason: "A cluster-scoped Widget keeps every field but its managed fields.", in: clusterWidget(1)},
		"NamespacedKey":     {reason: "A namespaced WidgetKey keeps every field but its managed fields.", in: nsKey(1)},
		"ClusterKey":        {reason: "A cluster-scoped WidgetKey keeps every field but its managed fields.", in: clusterKey(1)},
		"NamespacedUsage":   {reason: "A namespaced ProviderConfigUsage keeps every field but its managed fields.", in: nsUsage(1)},
		"ClusterUsage":      {reason: "A cluster-scoped ProviderConfigUsage keeps every field but its managed fields.", in: clusterUsage(1)},
		"ProviderConfig":    {reason: "Any other object keeps every field but its managed fields.", in: &nsv1alpha1.ClusterProviderConfig{ObjectMeta: objectMeta(1)}},
		"PartialMetadata":   {reason: "Objects of metadata-only informers are handled too.", in: &metav1.PartialObjectMetadata{ObjectMeta: objectMeta(1)}},
		"EmptyMaps":         {reason: "Empty maps stay empty, nil maps stay nil.", in: &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, ManagedFields: []metav1.ManagedFieldsEntry{{}}}}},
		"NoProviderConfig":  {reason: "A managed resource without a ProviderConfig reference is fine.", in: &nsv1beta1.WidgetKey{}},
		"ForeignUsageLabel": {reason: "A ProviderConfigUsage with other labels keeps them.", in: func() client.Object { u := nsUsage(2); u.Labels["x"] = "y"; return u }()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := tc.in.DeepCopyObject().(client.Object)
			want.SetManagedFields(nil)
			got, err := Transform(tc.in)
			if err != nil {
				t.Fatalf("%s\nTransform(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nTransform(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTransformPassesOtherValues(t *testing.T) {
	in := cache.DeletedFinalStateUnknown{Key: "ns/name", Obj: nsWidget(1)}
	got, err := Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("Transform(DeletedFinalStateUnknown): -want, +got:\n%s", diff)
	}
}

// decode decodes o's JSON as an informer would: every string a new copy.
func decode(t testing.TB, o kruntime.Object) kruntime.Object {
	t.Helper()
	s := kruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := serializer.NewCodecFactory(s).UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestTransformShares(t *testing.T) {
	a := decode(t, nsWidget(1)).(*nsv1beta1.Widget)
	b := decode(t, nsWidget(2)).(*nsv1beta1.Widget)
	if same(a.Namespace, b.Namespace) {
		t.Fatal("decoded objects share strings before Transform; the test proves nothing")
	}
	for _, o := range []client.Object{a, b} {
		if _, err := Transform(o); err != nil {
			t.Fatal(err)
		}
	}
	key := func(m map[string]string, want string) string {
		for k := range m {
			if k == want {
				return k
			}
		}
		t.Fatalf("no key %q in %v", want, m)
		return ""
	}
	shared := map[string][2]string{
		"namespace":         {a.Namespace, b.Namespace},
		"apiVersion":        {a.APIVersion, b.APIVersion},
		"kind":              {a.Kind, b.Kind},
		"annotation key":    {key(a.Annotations, "crossplane.io/external-name"), key(b.Annotations, "crossplane.io/external-name")},
		"label key":         {key(a.Labels, "crossplane.io/composite"), key(b.Labels, "crossplane.io/composite")},
		"finalizer":         {a.Finalizers[0], b.Finalizers[0]},
		"owner kind":        {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"condition type":    {string(a.Status.Conditions[1].Type), string(b.Status.Conditions[1].Type)},
		"condition status":  {string(a.Status.Conditions[1].Status), string(b.Status.Conditions[1].Status)},
		"condition reason":  {string(a.Status.Conditions[1].Reason), string(b.Status.Conditions[1].Reason)},
		"policy":            {string(a.Spec.ManagementPolicies[0]), string(b.Spec.ManagementPolicies[0])},
		"providerConfigRef": {a.Spec.ProviderConfigReference.Kind, b.Spec.ProviderConfigReference.Kind},
		"size":              {*a.Spec.ForProvider.Size, *b.Spec.ForProvider.Size},
		"region":            {*a.Spec.InitProvider.Region, *b.Spec.InitProvider.Region},
		"observed state":    {string(a.Status.AtProvider.State), string(b.Status.AtProvider.State)},
		"observed label":    {key(a.Status.AtProvider.Labels, "widgetco.io/owner"), key(b.Status.AtProvider.Labels, "widgetco.io/owner")},
	}
	for what, s := range shared {
		if !same(s[0], s[1]) {
			t.Errorf("%s %q: two copies after Transform, want one", what, s[0])
		}
	}
	unique := map[string][2]string{
		"name":           {a.Name, b.Name},
		"external name":  {a.Annotations["crossplane.io/external-name"], b.Annotations["crossplane.io/external-name"]},
		"observed label": {a.Status.AtProvider.Labels["widgetco.io/owner"], b.Status.AtProvider.Labels["widgetco.io/owner"]},
	}
	strs.mu.RLock()
	for what, s := range unique {
		for _, v := range s {
			if _, ok := strs.m[v]; ok {
				t.Errorf("%s %q was shared: values that differ between objects must not fill the table", what, v)
			}
		}
	}
	strs.mu.RUnlock()

	if mapOf(a.Spec.ForProvider.Labels) != mapOf(b.Spec.ForProvider.Labels) {
		t.Error("two Widgets with equal spec labels have two maps after Transform, want one")
	}
	if mapOf(a.Status.AtProvider.Labels) == mapOf(b.Status.AtProvider.Labels) {
		t.Error("two Widgets with different observed labels share a map")
	}

	u1 := decode(t, nsUsage(1)).(*nsv1alpha1.ProviderConfigUsage)
	u2 := decode(t, nsUsage(2)).(*nsv1alpha1.ProviderConfigUsage)
	for _, o := range []client.Object{u1, u2} {
		if _, err := Transform(o); err != nil {
			t.Fatal(err)
		}
	}
	if mapOf(u1.Labels) != mapOf(u2.Labels) {
		t.Error("two ProviderConfigUsages of one ProviderConfig have two labels maps after Transform, want one")
	}
	u3 := decode(t, nsUsage(3)).(*nsv1alpha1.ProviderConfigUsage)
	u3.Labels[xpv2.LabelKeyProviderName] = "other"
	if _, err := Transform(u3); err != nil {
		t.Fatal(err)
	}
	if u3.Labels[xpv2.LabelKeyProviderName] != "other" {
		t.Errorf("a usage of another ProviderConfig got labels %v", u3.Labels)
	}
}

func mapOf(m map[string]string) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

func TestMapTable(t *testing.T) {
	tab := newMapTable(2)
	a := map[string]string{"team": "a", "env": "prod"}
	if got := tab.share(a); mapOf(got) != mapOf(a) {
		t.Fatal("the first map of its content was not kept as the shared one")
	}
	// Equal content, built in another order: the shared map.
	if got := tab.share(map[string]string{"env": "prod", "team": "a"}); mapOf(got) != mapOf(a) {
		t.Error("a map equal to a shared one: got a map of its own, want the shared one")
	}
	// Same keys and values, paired differently: not equal.
	swapped := map[string]string{"team": "prod", "env": "a"}
	if got := tab.share(swapped); mapOf(got) == mapOf(a) {
		t.Errorf("share(%v) returned %v", swapped, got)
	}
	if tab.n != 2 {
		t.Fatalf("table holds %d maps, want 2", tab.n)
	}
	// Full: new content is given back as it is, and not kept.
	b := map[string]string{"team": "b"}
	if got := tab.share(b); mapOf(got) != mapOf(b) || tab.n != 2 {
		t.Errorf("share beyond the limit: table holds %d maps, want 2, and the map given back", tab.n)
	}
	if got := tab.share(map[string]string{"team": "b"}); mapOf(got) == mapOf(b) {
		t.Error("a map offered when the table was full was kept")
	}
	// Maps that are not shared at all.
	big := map[string]string{}
	for i := range maxMapLen + 1 {
		big[fmt.Sprint(i)] = "v"
	}
	long := map[string]string{"k": strings.Repeat("v", maxStringLen+1)}
	for _, m := range []map[string]string{nil, {}, big, long} {
		other := maps.Clone(m)
		if got := newMapTable(10).share(m); mapOf(got) != mapOf(m) {
			t.Errorf("share(%d entries) did not return its own map", len(m))
		}
		tb := newMapTable(10)
		tb.share(m)
		if got := tb.share(other); len(m) > 0 && mapOf(got) != mapOf(other) {
			t.Errorf("a map of %d entries (or a long value) was shared, want it left alone", len(m))
		}
	}
}

func TestInternerLimit(t *testing.T) {
	in := newInterner(2)
	a, b := in.intern(string([]byte("a"))), in.intern(string([]byte("b")))
	if got := in.intern(string([]byte("a"))); !same(got, a) {
		t.Error("intern(a) twice: two copies, want one")
	}
	if got := in.intern(string([]byte("b"))); !same(got, b) {
		t.Error("intern(b) twice: two copies, want one")
	}
	c := string([]byte("c"))
	if got := in.intern(c); !same(got, c) || len(in.m) != 2 {
		t.Errorf("intern beyond the limit: table has %d strings, want 2, and the string given back", len(in.m))
	}
	if got := in.intern(""); got != "" {
		t.Errorf("intern(\"\") = %q", got)
	}
	long := strings.Repeat("k", maxStringLen+1)
	if got := newInterner(2).intern(long); !same(got, long) {
		t.Error("a string longer than maxStringLen was copied into the table")
	}
}

// BenchmarkCachedObjects reports the heap that n decoded objects hold with
// and without Transform: what the informer caches hold per object.
func BenchmarkCachedObjects(b *testing.B) {
	const n = 2000
	kinds := map[string]func(int) kruntime.Object{
		"Widget":              func(i int) kruntime.Object { return nsWidget(i) },
		"WidgetKey":           func(i int) kruntime.Object { return nsKey(i) },
		"ProviderConfigUsage": func(i int) kruntime.Object { return nsUsage(i) },
	}
	for kind, mk := range kinds {
		docs := make([]kruntime.Object, n)
		for i := range n {
			docs[i] = mk(i)
		}
		for _, slim := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/transform=%t", kind, slim), func(b *testing.B) {
				raw := make([][]byte, n)
				for i := range n {
					raw[i], _ = json.Marshal(docs[i])
				}
				s := kruntime.NewScheme()
				if err := apis.AddToScheme(s); err != nil {
					b.Fatal(err)
				}
				dec := serializer.NewCodecFactory(s).UniversalDeserializer()
				var perObject float64
				for b.Loop() {
					held := make([]kruntime.Object, n)
					before := heapInUse()
					for i := range n {
						o, _, err := dec.Decode(raw[i], nil, nil)
						if err != nil {
							b.Fatal(err)
						}
						// Without Transform: what the cache did before,
						// controller-runtime's TransformStripManagedFields.
						o.(client.Object).SetManagedFields(nil)
						if slim {
							if _, err := Transform(o); err != nil {
								b.Fatal(err)
							}
						}
						held[i] = o
					}
					perObject = float64(heapInUse()-before) / n
					runtime.KeepAlive(held)
				}
				b.ReportMetric(perObject, "heap-B/object")
			})
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkTransform reports what Transform costs per cached Widget: the
// informer runs it on every watch event.
func BenchmarkTransform(b *testing.B) {
	w := decode(b, nsWidget(1)).(*nsv1beta1.Widget)
	for b.Loop() {
		b.StopTimer()
		o := w.DeepCopy()
		b.StartTimer()
		if _, err := Transform(o); err != nil {
			b.Fatal(err)
		}
	}
}
