// Package v1alpha1 is version v1alpha1 of the widget.widgetco.io API group:
// provider-widget's cluster-scoped managed resources (Widget, WidgetKey), the
// kinds that legacy claims and LegacyCluster composite resources compose, and
// the cluster-scoped ProviderConfig and ProviderConfigUsage they use.
//
// New work should prefer the namespaced widget.m.widgetco.io group. The
// spec.forProvider and status.atProvider types are shared with it; see package
// github.com/widgetco/crossplane-widget/apis/common/v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=widget.widgetco.io
// +versionName=v1alpha1
package v1alpha1
