package apis_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// benchWidget is a Widget as function-widget composes it, with the status
// the provider writes: every field the conversions touch is set.
func benchWidget(i int) *namespacedv1beta1.Widget {
	w := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: fmt.Sprintf("bench-%04d", i),
			Annotations: map[string]string{"crossplane.io/external-name": fmt.Sprintf("team-a-bench-%04d", i)},
			Labels:      map[string]string{"crossplane.io/composite": "web"},
		},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
			ForProvider:         commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a", "env": "prod"}, Description: ptr.To("XWidget team-a/web, managed by Crossplane")},
			InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1"), Size: ptr.To("small")},
		},
	}
	w.Status.SetConditions(xpv2.Available(), xpv2.ReconcileSuccess())
	w.Status.AtProvider = commonv1beta1.WidgetObservation{ID: "w-1", State: commonv1beta1.WidgetStateReady, Endpoint: "https://w.example.com", Size: "medium", Region: "us-east-1", Generation: 3}
	return w
}

// BenchmarkConvert measures one Widget's conversion in each direction, the
// work the webhook does per object (without JSON decoding and encoding).
func BenchmarkConvert(b *testing.B) {
	hub := benchWidget(0)
	b.Run("ToV1alpha1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := (&namespacedv1alpha1.Widget{}).ConvertFrom(hub); err != nil {
				b.Fatal(err)
			}
		}
	})
	spoke := &namespacedv1alpha1.Widget{}
	if err := spoke.ConvertFrom(hub); err != nil {
		b.Fatal(err)
	}
	b.Run("ToV1beta1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := spoke.ConvertTo(&namespacedv1beta1.Widget{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkListThroughWebhook lists 1,000 Widgets from a real kube-apiserver
// in the storage version (no conversion) and in v1alpha1 (every object
// converted by the conversion webhook, served in-process over TLS): the cost
// of the webhook at 1,000 objects is the difference. Needs
// KUBEBUILDER_ASSETS (eval "$(bash hack/tools.sh env)").
func BenchmarkListThroughWebhook(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip(`KUBEBUILDER_ASSETS is not set; run eval "$(bash hack/tools.sh env)"`)
	}
	const n = 1000
	c, _ := startAPIServer(b)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		w := benchWidget(i)
		status := w.Status
		if err := c.Create(ctx, w); err != nil {
			b.Fatal(err)
		}
		w.Status = status
		if err := c.Status().Update(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		list client.ObjectList
	}{
		{"V1beta1", &namespacedv1beta1.WidgetList{}},
		{"V1alpha1", &namespacedv1alpha1.WidgetList{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.List(ctx, tc.list, client.InNamespace(testNamespace)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/object")
		})
	}
}
