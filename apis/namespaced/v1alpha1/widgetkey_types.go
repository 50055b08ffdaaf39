package v1alpha1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
)

// WidgetKeyParameters are the settings of an access key: which widget it
// belongs to, and its description. Name the widget with widgetName, or let
// Crossplane set widgetName from widgetNameRef or widgetNameSelector, which
// resolve to a namespaced Widget.
//
// +kubebuilder:validation:XValidation:rule="has(self.widgetName) || has(self.widgetNameRef) || has(self.widgetNameSelector)",message="set widgetName, widgetNameRef or widgetNameSelector to say which widget the key belongs to"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.widgetName) || (has(self.widgetName) && self.widgetName == oldSelf.widgetName)",message="widgetName is immutable once set: a key cannot move to another widget; delete and recreate the WidgetKey"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.description) || (has(self.description) && self.description == oldSelf.description)",message="description is immutable once set: the Widget API cannot change a key; delete and recreate the WidgetKey"
// +kubebuilder:validation:XValidation:rule="!has(self.widgetNameRef) || !has(self.widgetNameRef.__namespace__) || size(self.widgetNameRef.__namespace__) == 0 || (has(self.widgetNameSelector) && has(self.widgetName))",message="widgetNameRef.namespace must not be set: a WidgetKey can reference only Widgets in its own namespace (Crossplane sets it, together with widgetName, when it resolves widgetNameSelector)"
// +kubebuilder:validation:XValidation:rule="!has(self.widgetNameSelector) || !has(self.widgetNameSelector.__namespace__) || size(self.widgetNameSelector.__namespace__) == 0",message="widgetNameSelector.namespace must not be set: a WidgetKey can select only Widgets in its own namespace"
type WidgetKeyParameters struct {
	// WidgetName is the name of the widget the key belongs to: the external
	// name of a Widget. Crossplane sets it from widgetNameRef or
	// widgetNameSelector when one of those is used. It cannot change once
	// set.
	// +optional
	// +crossplane:generate:reference:type=Widget
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`
	WidgetName *string `json:"widgetName,omitempty"`

	// WidgetNameRef references the Widget that the key belongs to, in the
	// WidgetKey's own namespace: namespace must not be set, since a
	// namespace cannot reach another's Widgets. Crossplane sets it to the
	// WidgetKey's namespace, together with widgetName, when it resolves
	// widgetNameSelector: a namespace is accepted only next to a selector
	// and a widgetName, where Crossplane does not follow the reference
	// again. Crossplane sets widgetName to that Widget's external name.
	// +optional
	WidgetNameRef *xpv2.NamespacedReference `json:"widgetNameRef,omitempty"`

	// WidgetNameSelector selects the Widget that the key belongs to by its
	// labels, in the WidgetKey's own namespace: namespace must not be set.
	// Crossplane sets widgetName to the selected Widget's external name and
	// widgetNameRef to the selected Widget.
	// +optional
	WidgetNameSelector *xpv2.NamespacedSelector `json:"widgetNameSelector,omitempty"`

	commonv1alpha1.WidgetKeyParameters `json:",inline"`
}

// A WidgetKeySpec is the desired state of a WidgetKey.
//
// +kubebuilder:validation:XValidation:rule="!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",message="providerConfigRef.kind must be ProviderConfig (a ProviderConfig in this namespace) or ClusterProviderConfig"
type WidgetKeySpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`

	// ForProvider is the access key as it should be in the Widget API.
	ForProvider WidgetKeyParameters `json:"forProvider"`
}

// A WidgetKeyStatus is the observed state of a WidgetKey.
type WidgetKeyStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	// AtProvider is the access key as the Widget API last reported it.
	// +optional
	AtProvider commonv1alpha1.WidgetKeyObservation `json:"atProvider,omitempty"`
}

// A WidgetKey is an access key of a widget in the Widget API, managed by
// Crossplane. The key's name within its widget is the WidgetKey's external
// name. The Widget API reveals a key's secret only when the key is created:
// Crossplane writes it, with the widget's endpoint, to the Secret named by
// writeConnectionSecretToRef, and nowhere else.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="EXTERNAL-NAME",type="string",JSONPath=".metadata.annotations.crossplane\\.io/external-name"
// +kubebuilder:printcolumn:name="WIDGET",type="string",JSONPath=".spec.forProvider.widgetName"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,widget}
type WidgetKey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetKeySpec   `json:"spec"`
	Status WidgetKeyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WidgetKeyList is a list of WidgetKeys.
type WidgetKeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WidgetKey `json:"items"`
}

// WidgetKey type metadata.
var (
	WidgetKeyKind             = reflect.TypeOf(WidgetKey{}).Name()
	WidgetKeyGroupKind        = schema.GroupKind{Group: Group, Kind: WidgetKeyKind}.String()
	WidgetKeyKindAPIVersion   = WidgetKeyKind + "." + SchemeGroupVersion.String()
	WidgetKeyGroupVersionKind = SchemeGroupVersion.WithKind(WidgetKeyKind)
)

func init() {
	SchemeBuilder.Register(&WidgetKey{}, &WidgetKeyList{})
}
