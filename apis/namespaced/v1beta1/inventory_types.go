package v1beta1

import (
	"reflect"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a WidgetInventory.
const (
	// DefaultInventoryLimit is how many widgets status.atProvider.widgets
	// lists when spec.forProvider.limit is unset.
	DefaultInventoryLimit = int32(100)
	// MaxInventoryLimit is the most widgets it may list: about 300 bytes
	// each keeps the resource far from what etcd stores (1.5 MiB).
	MaxInventoryLimit = int32(500)
	// MaxInventoryScan is the most widgets one observation reads from the
	// Widget API (20 pages of 500); beyond it the counts are of those read,
	// and status.atProvider.truncated says so.
	MaxInventoryScan = 10000
)

// WidgetInventoryParameters select the widgets of the ProviderConfig's
// Widget API project that a WidgetInventory lists.
type WidgetInventoryParameters struct {
	// MatchLabels selects the widgets that carry all of these labels.
	// Unset, every widget of the project.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('widgetco.io/'))",message="labels with the prefix widgetco.io/ are the provider's ownership markers; select widgets by their own labels"
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// Limit is the most widgets status.atProvider.widgets lists, unowned
	// ones first; the others are counted. Defaults to 100; at most 500.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=500
	Limit *int32 `json:"limit,omitempty"`
}

// A WidgetInventorySpec is what a WidgetInventory lists. A WidgetInventory
// only reads: it creates, changes and deletes nothing in the Widget API,
// whatever its management policies say.
//
// +kubebuilder:validation:XValidation:rule="!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",message="providerConfigRef.kind must be ProviderConfig (a ProviderConfig in this namespace) or ClusterProviderConfig"
type WidgetInventorySpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`

	// ForProvider selects the widgets to list.
	// +optional
	// +kubebuilder:default={}
	ForProvider WidgetInventoryParameters `json:"forProvider"`
}

// An Owner says who manages a widget, as a namespace may know it.
// +kubebuilder:validation:Enum=Unowned;ManagedHere;ReleasedHere
type Owner string

// Owners of a listed widget. Widgets that resources of other namespaces (or
// cluster-scoped ones) manage, or that are reserved for another namespace,
// are never listed, only counted (outOfReach).
const (
	// OwnerUnowned: no managed resource manages the widget; a Widget or an
	// XWidget of this namespace may adopt it.
	OwnerUnowned Owner = "Unowned"
	// OwnerManagedHere: a managed resource of this namespace manages it
	// (managedBy names it; controlPlane names its control plane).
	OwnerManagedHere Owner = "ManagedHere"
	// OwnerReleasedHere: a resource of this namespace released it and it
	// is reserved for this namespace; a resource here may adopt it.
	OwnerReleasedHere Owner = "ReleasedHere"
)

// An InventoryWidget is one widget a WidgetInventory lists.
type InventoryWidget struct {
	// Name of the widget in the Widget API: what an adoption names.
	Name string `json:"name"`
	// Owner says who manages it.
	Owner Owner `json:"owner"`
	// ManagedBy is the name of the managed resource of this namespace
	// that manages it (the widget does not record its kind), or its owner
	// marker where the marker was shortened.
	// +optional
	ManagedBy string `json:"managedBy,omitempty"`
	// ControlPlane is the control plane whose resource manages it.
	// +optional
	ControlPlane string `json:"controlPlane,omitempty"`
	// Size, Region and State as the Widget API reports them.
	// +optional
	Size string `json:"size,omitempty"`
	// +optional
	Region string `json:"region,omitempty"`
	// +optional
	State string `json:"state,omitempty"`
	// Labels are the widget's own labels, without the provider's
	// ownership markers.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// A WidgetInventoryObservation is what the last look at the project found.
type WidgetInventoryObservation struct {
	// Widgets are the widgets the selector matches and this namespace may
	// see, unowned ones first, then by name; at most spec.forProvider.limit.
	// +optional
	Widgets []InventoryWidget `json:"widgets,omitempty"`
	// Matched counts every widget the selector matched among those read.
	// +optional
	Matched int32 `json:"matched,omitempty"`
	// Unowned, ManagedHere and ReleasedHere count the widgets of each
	// owner, listed or not.
	// +optional
	Unowned int32 `json:"unowned,omitempty"`
	// +optional
	ManagedHere int32 `json:"managedHere,omitempty"`
	// +optional
	ReleasedHere int32 `json:"releasedHere,omitempty"`
	// OutOfReach counts the matched widgets that resources outside this
	// namespace manage or that are reserved for another namespace: they
	// are never named here.
	// +optional
	OutOfReach int32 `json:"outOfReach,omitempty"`
	// Truncated says that the project holds more widgets than one
	// observation reads (10,000): the counts are of the first 10,000.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// A WidgetInventoryStatus is the observed state of a WidgetInventory.
type WidgetInventoryStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	// AtProvider is what the last look at the project found.
	// +optional
	AtProvider WidgetInventoryObservation `json:"atProvider,omitempty"`
}

// A WidgetInventory lists the widgets of the Widget API project that its
// ProviderConfig reaches, with who manages each, as this namespace may know
// it: the unowned widgets a team can adopt (spec.adopt of an XWidget, or
// the AdoptWidgets operation of function-widget), those its own resources
// manage or released, and a count of the rest. It only reads, at every poll.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="MATCHED",type="integer",JSONPath=".status.atProvider.matched"
// +kubebuilder:printcolumn:name="UNOWNED",type="integer",JSONPath=".status.atProvider.unowned"
// +kubebuilder:printcolumn:name="MANAGED",type="integer",JSONPath=".status.atProvider.managedHere"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,widget}
type WidgetInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetInventorySpec   `json:"spec"`
	Status WidgetInventoryStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WidgetInventoryList is a list of WidgetInventories.
type WidgetInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WidgetInventory `json:"items"`
}

// WidgetInventory type metadata.
var (
	WidgetInventoryKind             = reflect.TypeOf(WidgetInventory{}).Name()
	WidgetInventoryGroupVersionKind = SchemeGroupVersion.WithKind(WidgetInventoryKind)
)

func init() {
	SchemeBuilder.Register(&WidgetInventory{}, &WidgetInventoryList{})
}
