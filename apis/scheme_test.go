package apis_test

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme(): %v", err)
	}

	ns := namespacedv1alpha1.SchemeGroupVersion
	cl := clusterv1alpha1.SchemeGroupVersion
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
	for _, gv := range []schema.GroupVersion{ns, cl} {
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
