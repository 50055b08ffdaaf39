// Package v1beta1 is version v1beta1 of the widget.widgetco.io API group:
// provider-widget's cluster-scoped managed resources (Widget, WidgetKey), the
// kinds that legacy claims and LegacyCluster composite resources compose. It
// is the storage version and the version the provider reconciles; v1alpha1
// is served too, converted by the provider's conversion webhook. The
// ProviderConfig kinds exist only in v1alpha1.
//
// New work should prefer the namespaced widget.m.widgetco.io group. The spec
// and status types are shared with it; see package
// github.com/widgetco/crossplane-widget/apis/common/v1beta1.
//
// +kubebuilder:object:generate=true
// +groupName=widget.widgetco.io
// +versionName=v1beta1
package v1beta1
