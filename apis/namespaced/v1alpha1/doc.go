// Package v1alpha1 is version v1alpha1 of the widget.m.widgetco.io API group:
// provider-widget's namespaced, Crossplane v2 style managed resources (Widget,
// WidgetKey) and the configuration they use (ProviderConfig in a namespace,
// ClusterProviderConfig for the whole cluster, ProviderConfigUsage).
//
// The spec.forProvider and status.atProvider types are shared with the
// cluster-scoped widget.widgetco.io group; see package
// github.com/widgetco/crossplane-widget/apis/common/v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=widget.m.widgetco.io
// +versionName=v1alpha1
package v1alpha1
