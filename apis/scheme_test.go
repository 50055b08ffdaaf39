package apis_test

import (
	"reflect"
	"strings"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/conversion"
	webhookconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme(): %v", err)
	}

	ns := namespacedv1alpha1.SchemeGroupVersion
	cl := clusterv1alpha1.SchemeGroupVersion
	nsBeta := namespacedv1beta1.SchemeGroupVersion
	clBeta := clusterv1beta1.SchemeGroupVersion
	cases := map[string]struct {
		reason string
		gvk    schema.GroupVersionKind
		want   runtime.Object
	}{
		"NamespacedWidget":                {reason: "The namespaced Widget must be registered.", gvk: ns.WithKind("Widget"), want: &namespacedv1alpha1.Widget{}},
		"NamespacedWidgetList":            {reason: "The namespaced Widget list must be registered.", gvk: ns.WithKind("WidgetList"), want: &namespacedv1alpha1.WidgetList{}},
		"NamespacedWidgetKey":             {reason: "The namespaced WidgetKey must be registered.", gvk: ns.WithKind("WidgetKey"), want: &namespacedv1alpha1.WidgetKey{}},
		"NamespacedWidgetKeyList":         {reason: "The namespaced WidgetKey list must be registered.", gvk: ns.WithKind("WidgetKeyList"), want: &namespacedv1alpha1.WidgetKeyList{}},
		"NamespacedProviderConfig":        {reason: "The namespaced ProviderConfig must be registered.", gvk: ns.WithKind("ProviderConfig"), want: &namespacedv1alpha1.ProviderConfig{}},
		"NamespacedProviderConfigList":    {reason: "The namespaced ProviderConfig list must be registered.", gvk: ns.WithKind("ProviderConfigList"), want: &namespacedv1alpha1.ProviderConfigList{}},
		"ClusterProviderConfig":           {reason: "The ClusterProviderConfig must be registered.", gvk: ns.WithKind("ClusterProviderConfig"), want: &namespacedv1alpha1.ClusterProviderConfig{}},
		"ClusterProviderConfigList":       {reason: "The ClusterProviderConfig list must be registered.", gvk: ns.WithKind("ClusterProviderConfigList"), want: &namespacedv1alpha1.ClusterProviderConfigList{}},
		"NamespacedProviderConfigUsage":   {reason: "The namespaced ProviderConfigUsage must be registered.", gvk: ns.WithKind("ProviderConfigUsage"), want: &namespacedv1alpha1.ProviderConfigUsage{}},
		"NamespacedProviderConfigUsageLs": {reason: "The namespaced ProviderConfigUsage list must be registered.", gvk: ns.WithKind("ProviderConfigUsageList"), want: &namespacedv1alpha1.ProviderConfigUsageList{}},
		"ClusterWidget":                   {reason: "The cluster-scoped Widget must be registered.", gvk: cl.WithKind("Widget"), want: &clusterv1alpha1.Widget{}},
		"ClusterWidgetList":               {reason: "The cluster-scoped Widget list must be registered.", gvk: cl.WithKind("WidgetList"), want: &clusterv1alpha1.WidgetList{}},
		"ClusterWidgetKey":                {reason: "The cluster-scoped WidgetKey must be registered.", gvk: cl.WithKind("WidgetKey"), want: &clusterv1alpha1.WidgetKey{}},
		"ClusterWidgetKeyList":            {reason: "The cluster-scoped WidgetKey list must be registered.", gvk: cl.WithKind("WidgetKeyList"), want: &clusterv1alpha1.WidgetKeyList{}},
		"LegacyProviderConfig":            {reason: "The cluster-scoped ProviderConfig must be registered.", gvk: cl.WithKind("ProviderConfig"), want: &clusterv1alpha1.ProviderConfig{}},
		"LegacyProviderConfigList":        {reason: "The cluster-scoped ProviderConfig list must be registered.", gvk: cl.WithKind("ProviderConfigList"), want: &clusterv1alpha1.ProviderConfigList{}},
		"LegacyProviderConfigUsage":       {reason: "The cluster-scoped ProviderConfigUsage must be registered.", gvk: cl.WithKind("ProviderConfigUsage"), want: &clusterv1alpha1.ProviderConfigUsage{}},
		"LegacyProviderConfigUsageList":   {reason: "The cluster-scoped ProviderConfigUsage list must be registered.", gvk: cl.WithKind("ProviderConfigUsageList"), want: &clusterv1alpha1.ProviderConfigUsageList{}},
		"NamespacedWidgetV1beta1":         {reason: "The namespaced v1beta1 Widget must be registered.", gvk: nsBeta.WithKind("Widget"), want: &namespacedv1beta1.Widget{}},
		"NamespacedWidgetListV1beta1":     {reason: "The namespaced v1beta1 Widget list must be registered.", gvk: nsBeta.WithKind("WidgetList"), want: &namespacedv1beta1.WidgetList{}},
		"NamespacedWidgetKeyV1beta1":      {reason: "The namespaced v1beta1 WidgetKey must be registered.", gvk: nsBeta.WithKind("WidgetKey"), want: &namespacedv1beta1.WidgetKey{}},
		"NamespacedWidgetKeyListV1beta1":  {reason: "The namespaced v1beta1 WidgetKey list must be registered.", gvk: nsBeta.WithKind("WidgetKeyList"), want: &namespacedv1beta1.WidgetKeyList{}},
		"ClusterWidgetV1beta1":            {reason: "The cluster-scoped v1beta1 Widget must be registered.", gvk: clBeta.WithKind("Widget"), want: &clusterv1beta1.Widget{}},
		"ClusterWidgetListV1beta1":        {reason: "The cluster-scoped v1beta1 Widget list must be registered.", gvk: clBeta.WithKind("WidgetList"), want: &clusterv1beta1.WidgetList{}},
		"ClusterWidgetKeyV1beta1":         {reason: "The cluster-scoped v1beta1 WidgetKey must be registered.", gvk: clBeta.WithKind("WidgetKey"), want: &clusterv1beta1.WidgetKey{}},
		"ClusterWidgetKeyListV1beta1":     {reason: "The cluster-scoped v1beta1 WidgetKey list must be registered.", gvk: clBeta.WithKind("WidgetKeyList"), want: &clusterv1beta1.WidgetKeyList{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := s.New(tc.gvk)
			if err != nil {
				t.Fatalf("%s\nNew(%s): %v", tc.reason, tc.gvk, err)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(tc.want) {
				t.Errorf("%s\nNew(%s): want a %T, got a %T", tc.reason, tc.gvk, tc.want, got)
			}
		})
	}

	// Every kind the CRDs serve must be in the scheme, and every kind in the
	// scheme's groups must be served by a CRD, so the provider can neither
	// miss a kind nor register one the API server does not know.
	served := map[schema.GroupVersionKind]bool{}
	for file := range wantCRDs {
		crd := loadCRD(t, file)
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			served[gvk] = true
			if !s.Recognizes(gvk) {
				t.Errorf("CRD %s serves %s, which AddToScheme does not register", file, gvk)
			}
		}
	}
	for _, gv := range []schema.GroupVersion{ns, cl, nsBeta, clBeta} {
		for kind, typ := range s.KnownTypes(gv) {
			gvk := gv.WithKind(kind)
			if strings.HasSuffix(kind, "List") || !strings.HasPrefix(typ.PkgPath(), "github.com/widgetco/crossplane-widget/") {
				// Lists, and the meta kinds every group version gets.
				continue
			}
			if !served[gvk] {
				t.Errorf("AddToScheme registers %s, which no CRD serves", gvk)
			}
		}
	}
}

// TestSchemeConverts ties the CRDs' conversion to the API types: a kind whose
// CRD has the conversion webhook must be convertible with controller-runtime's
// hub and spoke conversion (its storage version the hub, every other version
// a spoke), or the webhook cannot convert it; a kind whose CRD has no
// conversion must have one version.
func TestSchemeConverts(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme(): %v", err)
	}
	for file := range wantCRDs {
		t.Run(file, func(t *testing.T) {
			crd := loadCRD(t, file)
			webhook := crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == extv1.WebhookConverter
			for _, v := range crd.Spec.Versions {
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
				obj, err := s.New(gvk)
				if err != nil {
					t.Fatalf("New(%s): %v", gvk, err)
				}
				ok, err := webhookconversion.IsConvertible(s, obj)
				if err != nil || ok != webhook {
					t.Errorf("%s: IsConvertible() = %t, %v; want %t because the CRD's conversion is %+v", gvk, ok, err, webhook, crd.Spec.Conversion)
				}
				if !webhook {
					continue
				}
				_, hub := obj.(ctrlconversion.Hub)
				_, spoke := obj.(ctrlconversion.Convertible)
				if hub != v.Storage || spoke == v.Storage {
					t.Errorf("%s: hub %t, spoke %t; want the storage version, and only it, to be the hub, and every other version a spoke", gvk, hub, spoke)
				}
			}
		})
	}
}
