// Package v1beta1 holds the API types that version v1beta1 of provider-widget's
// two API groups share: the namespaced widget.m.widgetco.io group (Crossplane
// v2 managed resources) and the cluster-scoped widget.widgetco.io group (the
// managed resources that legacy claims compose). Both groups embed these
// types, so a Widget has the same spec.forProvider, spec.initProvider and
// status.atProvider in either scope.
//
// v1beta1 is the storage version and the version the provider reconciles (the
// hub of Kubernetes' hub-and-spoke conversion); v1alpha1 objects are converted
// to and from it by the provider's conversion webhook. What changed from
// v1alpha1:
//
//   - region moved to spec.initProvider: it is used only when the widget is
//     created (a widget's region never changes).
//   - spec.initProvider also takes size, labels and description: values used
//     only to create the widget and then left to whoever changes the widget
//     in the Widget API (forProvider wins where both set a field; labels
//     are one field).
//   - size is required for a resource that Crossplane creates or updates,
//     in forProvider or initProvider; an observe-only import needs none.
//   - a WidgetKey's description, which the Widget API cannot change, moved to
//     spec.initProvider.
//
// The package also defines the interfaces (WidgetResource,
// WidgetKeyResource) that both scopes' kinds implement, so that one
// controller implementation, written against these interfaces with Go
// generics, serves both scopes.
//
// The package registers no API group and defines no kinds of its own.
//
// +kubebuilder:object:generate=true
package v1beta1
