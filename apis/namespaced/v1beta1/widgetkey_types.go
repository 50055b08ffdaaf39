package v1beta1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// WidgetKeyParameters say which widget an access key belongs to. Name the
// widget with widgetName, or let Crossplane set widgetName from
// widgetNameRef or widgetNameSelector, which resolve to a namespaced Widget.
//
// +kubebuilder:validation:XValidation:rule="has(self.widgetName) || has(self.widgetNameRef) || has(self.widgetNameSelector)",message="set widgetName, widgetNameRef or widgetNameSelector to say which widget the key belongs to"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.widgetName) || (has(self.widgetName) && self.widgetName == oldSelf.widgetName)",message="widgetName is immutable once set: a key cannot move to another widget; delete and recreate the WidgetKey"
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

	// Rotation, when set, has the provider replace the key with a new one
	// every period, or when requestedAt asks, without downtime: the
	// connection Secret holds the new key as key and the previous one as
	// previousKey until the overlap has passed and the previous key is
	// revoked. It needs writeConnectionSecretToRef, and a resource that
	// Crossplane creates, updates and deletes (managementPolicies).
	// +optional
	Rotation *commonv1beta1.KeyRotation `json:"rotation,omitempty"`
}

// A WidgetKeySpec is the desired state of a WidgetKey.
//
// +kubebuilder:validation:XValidation:rule="!has(self.forProvider.rotation) || has(self.writeConnectionSecretToRef)",message="spec.forProvider.rotation needs spec.writeConnectionSecretToRef: a rotated key's secret is published only in the connection Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.forProvider.rotation) || !has(self.managementPolicies) || '*' in self.managementPolicies || ('Create' in self.managementPolicies && 'Update' in self.managementPolicies && 'Delete' in self.managementPolicies)",message="spec.forProvider.rotation needs managementPolicies that include Create, Update and Delete (or '*'): rotating creates a new key, updates the connection Secret and revokes the previous key"
// +kubebuilder:validation:XValidation:rule="!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",message="providerConfigRef.kind must be ProviderConfig (a ProviderConfig in this namespace) or ClusterProviderConfig"
type WidgetKeySpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`

	// ForProvider is the access key as it should be in the Widget API.
	ForProvider WidgetKeyParameters `json:"forProvider"`

	// InitProvider is the access key's settings used only when Crossplane
	// creates it: the Widget API cannot change a key.
	// +optional
	// +kubebuilder:default={}
	InitProvider commonv1beta1.WidgetKeyInitParameters `json:"initProvider,omitempty"`
}

// A WidgetKeyStatus is the observed state of a WidgetKey.
type WidgetKeyStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	// AtProvider is the access key as the Widget API last reported it.
	// +optional
	AtProvider commonv1beta1.WidgetKeyObservation `json:"atProvider,omitempty"`
}

// A WidgetKey is an access key of a widget in the Widget API, managed by
// Crossplane. The key's name within its widget is the WidgetKey's external
// name. The Widget API reveals a key's secret only when the key is created:
// Crossplane writes it, with the widget's endpoint, to the Secret named by
// writeConnectionSecretToRef, and nowhere else.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// GetWidgetKeyInitParameters returns the WidgetKey's spec.initProvider. The
// pointer refers to the WidgetKey's own spec.
func (mg *WidgetKey) GetWidgetKeyInitParameters() *commonv1beta1.WidgetKeyInitParameters {
	return &mg.Spec.InitProvider
}

// ReferencedNamespaces returns, by field path, the namespaces that
// widgetNameRef and widgetNameSelector name explicitly. The provider resolves
// references only within the WidgetKey's own namespace.
func (mg *WidgetKey) ReferencedNamespaces() map[string]string {
	out := map[string]string{}
	if r := mg.Spec.ForProvider.WidgetNameRef; r != nil && r.Namespace != "" {
		out["spec.forProvider.widgetNameRef.namespace"] = r.Namespace
	}
	if s := mg.Spec.ForProvider.WidgetNameSelector; s != nil && s.Namespace != "" {
		out["spec.forProvider.widgetNameSelector.namespace"] = s.Namespace
	}
	return out
}

// GetWidgetName returns spec.forProvider.widgetName, or "" while it is
// neither set nor resolved.
func (mg *WidgetKey) GetWidgetName() string {
	return ptr.Deref(mg.Spec.ForProvider.WidgetName, "")
}

// GetKeyRotation returns spec.forProvider.rotation, or nil when the key is
// not rotated.
func (mg *WidgetKey) GetKeyRotation() *commonv1beta1.KeyRotation {
	return mg.Spec.ForProvider.Rotation
}

// GetWidgetKeyObservation returns the WidgetKey's status.atProvider. The
// pointer refers to the WidgetKey's own status.
func (mg *WidgetKey) GetWidgetKeyObservation() *commonv1beta1.WidgetKeyObservation {
	return &mg.Status.AtProvider
}

// SetWidgetKeyObservation replaces the WidgetKey's status.atProvider.
func (mg *WidgetKey) SetWidgetKeyObservation(o commonv1beta1.WidgetKeyObservation) {
	mg.Status.AtProvider = o
}

func init() {
	SchemeBuilder.Register(&WidgetKey{}, &WidgetKeyList{})
}
