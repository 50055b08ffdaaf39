package v1beta1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// A WidgetSpec is the desired state of a Widget.
//
// +kubebuilder:validation:XValidation:rule="(has(self.managementPolicies) && !('*' in self.managementPolicies || 'Create' in self.managementPolicies || 'Update' in self.managementPolicies)) || has(self.forProvider.size) || (has(self.initProvider) && has(self.initProvider.size))",message="spec.forProvider.size is required (small, medium or large), or spec.initProvider.size to set it only at creation; only an observe-only resource (managementPolicies: [Observe]) can leave it unset"
type WidgetSpec struct {
	xpv2.ClusterManagedResourceSpec `json:",inline"`

	// ForProvider is the widget as it should be in the Widget API.
	// +optional
	// +kubebuilder:default={}
	ForProvider commonv1beta1.WidgetParameters `json:"forProvider"`

	// InitProvider is the widget's settings used only when Crossplane
	// creates it: its region, and values that may change outside Crossplane
	// afterwards.
	// +optional
	// +kubebuilder:default={}
	InitProvider commonv1beta1.WidgetInitParameters `json:"initProvider,omitempty"`
}

// A WidgetStatus is the observed state of a Widget.
type WidgetStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	// AtProvider is the widget as the Widget API last reported it.
	// +optional
	AtProvider commonv1beta1.WidgetObservation `json:"atProvider,omitempty"`

	// Drift is what the provider restored of the widget when it was changed
	// outside Crossplane; unset until it first was.
	// +optional
	Drift *commonv1beta1.DriftRepairs `json:"drift,omitempty"`
}

// A Widget is a widget in the Widget API, managed by Crossplane. This is the
// cluster-scoped kind that legacy claims compose; prefer the namespaced
// Widget in widget.m.widgetco.io for new work. The widget's name in the API is
// the Widget's external name (the crossplane.io/external-name annotation). Set
// the annotation to the name of an existing widget to adopt it; with
// managementPolicies ["Observe"] Crossplane only imports it.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="EXTERNAL-NAME",type="string",JSONPath=".metadata.annotations.crossplane\\.io/external-name"
// +kubebuilder:printcolumn:name="SIZE",type="string",JSONPath=".status.atProvider.size"
// +kubebuilder:printcolumn:name="STATE",type="string",JSONPath=".status.atProvider.state"
// +kubebuilder:printcolumn:name="REGION",type="string",JSONPath=".status.atProvider.region",priority=1
// +kubebuilder:printcolumn:name="ENDPOINT",type="string",JSONPath=".status.atProvider.endpoint",priority=1
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories={crossplane,managed,widget}
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec"`
	Status WidgetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// Widget type metadata.
var (
	WidgetKind             = reflect.TypeOf(Widget{}).Name()
	WidgetGroupKind        = schema.GroupKind{Group: Group, Kind: WidgetKind}.String()
	WidgetKindAPIVersion   = WidgetKind + "." + SchemeGroupVersion.String()
	WidgetGroupVersionKind = SchemeGroupVersion.WithKind(WidgetKind)
)

// GetWidgetParameters returns the Widget's spec.forProvider. The pointer
// refers to the Widget's own spec.
func (mg *Widget) GetWidgetParameters() *commonv1beta1.WidgetParameters {
	return &mg.Spec.ForProvider
}

// GetWidgetInitParameters returns the Widget's spec.initProvider. The pointer
// refers to the Widget's own spec.
func (mg *Widget) GetWidgetInitParameters() *commonv1beta1.WidgetInitParameters {
	return &mg.Spec.InitProvider
}

// GetWidgetObservation returns the Widget's status.atProvider. The pointer
// refers to the Widget's own status.
func (mg *Widget) GetWidgetObservation() *commonv1beta1.WidgetObservation {
	return &mg.Status.AtProvider
}

// SetWidgetObservation replaces the Widget's status.atProvider.
func (mg *Widget) SetWidgetObservation(o commonv1beta1.WidgetObservation) {
	mg.Status.AtProvider = o
}

// GetDriftRepairs returns the Widget's status.drift, or nil.
func (mg *Widget) GetDriftRepairs() *commonv1beta1.DriftRepairs {
	return mg.Status.Drift
}

// SetDriftRepairs replaces the Widget's status.drift.
func (mg *Widget) SetDriftRepairs(d *commonv1beta1.DriftRepairs) {
	mg.Status.Drift = d
}

func init() {
	SchemeBuilder.Register(&Widget{}, &WidgetList{})
}
