// Package v1alpha1 holds the API types that provider-widget's two API groups
// share: the namespaced widget.m.widgetco.io group (Crossplane v2 managed
// resources) and the cluster-scoped widget.widgetco.io group (the managed
// resources that legacy claims compose). Both groups embed these types, so a
// Widget has the same spec.forProvider and status.atProvider in either scope.
//
// The package also defines the interfaces (WidgetResource, WidgetKeyResource,
// ProviderConfigResource) that both scopes' kinds implement, so that one
// controller implementation, written against these interfaces with Go
// generics, serves both scopes.
//
// The package registers no API group and defines no kinds of its own.
//
// +kubebuilder:object:generate=true
package v1alpha1
