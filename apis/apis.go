// Package apis holds provider-widget's Kubernetes API types: the namespaced
// widget.m.widgetco.io group (package namespaced/v1alpha1), the cluster-scoped
// widget.widgetco.io group (package cluster/v1alpha1), and the types both
// share (package common/v1alpha1). The provider and the composition function
// register them with AddToScheme.
package apis

import (
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

// AddToSchemes registers every kind of every API group in this module.
var AddToSchemes = runtime.SchemeBuilder{
	namespacedv1alpha1.AddToScheme,
	clusterv1alpha1.AddToScheme,
}

// AddToScheme adds every kind of every API group in this module to the
// supplied scheme.
func AddToScheme(s *runtime.Scheme) error {
	return AddToSchemes.AddToScheme(s)
}
