// Package v1beta1 is version v1beta1 of the widget.m.widgetco.io API group:
// provider-widget's namespaced, Crossplane v2 style managed resources (Widget,
// WidgetKey). It is the storage version and the version the provider
// reconciles; v1alpha1 is served too, converted by the provider's conversion
// webhook. The ProviderConfig kinds exist only in v1alpha1.
//
// The spec and status types are shared with the cluster-scoped
// widget.widgetco.io group; see package
// github.com/widgetco/crossplane-widget/apis/common/v1beta1, which also says
// what changed from v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=widget.m.widgetco.io
// +versionName=v1beta1
package v1beta1
