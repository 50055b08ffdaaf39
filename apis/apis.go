// Package apis holds provider-widget's Kubernetes API types: the namespaced
// widget.m.widgetco.io group (packages namespaced/v1beta1 and
// namespaced/v1alpha1), the cluster-scoped widget.widgetco.io group (packages
// cluster/v1beta1 and cluster/v1alpha1), and the types both groups share
// (packages common/v1beta1 and common/v1alpha1). Widget and WidgetKey are
// served in v1beta1, the storage version, and v1alpha1, converted by the
// provider's conversion webhook; the ProviderConfig kinds only in v1alpha1.
// The provider and the composition function register them with AddToScheme.
package apis

import (
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// AddToSchemes registers every kind of every API group and version in this
// module.
var AddToSchemes = runtime.SchemeBuilder{
	namespacedv1alpha1.AddToScheme,
	namespacedv1beta1.AddToScheme,
	clusterv1alpha1.AddToScheme,
	clusterv1beta1.AddToScheme,
}

// AddToScheme adds every kind of every API group in this module to the
// supplied scheme.
func AddToScheme(s *runtime.Scheme) error {
	return AddToSchemes.AddToScheme(s)
}
