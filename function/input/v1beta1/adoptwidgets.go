package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindAdoptWidgets is the kind of the operation input that turns the
// unowned widgets a WidgetInventory lists into XWidgets that review them.
const KindAdoptWidgets = "AdoptWidgets"

// Bounds of an AdoptWidgets operation.
const (
	// DefaultMaxWidgets is how many XWidgets one operation may write when
	// the input sets no maxWidgets.
	DefaultMaxWidgets = int32(100)
	// MaxWidgets is the most maxWidgets may allow: a WidgetInventory lists
	// at most 500 widgets.
	MaxWidgets = int32(500)
)

// AdoptWidgets writes, from an Operation, one XWidget per unowned widget
// (and per widget released for the namespace) that a WidgetInventory lists,
// named after the widget, with spec.adopt {name: <widget>, mode: Review}:
// each reviews its widget and changes nothing until the app team sets
// mode Manage. The XWidget takes the widget's size and labels (with the
// input's labels over them), and asks for no keys. A widget that an XWidget of the namespace already adopts,
// or whose name an XWidget there already has, is skipped: a rerun writes
// only what is new, and never rewrites an XWidget.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=crossplane
type AdoptWidgets struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Inventory is the WidgetInventory (widget.m.widgetco.io/v1beta1)
	// whose widgets are adopted; the XWidgets are written in its
	// namespace.
	Inventory InventoryReference `json:"inventory"`

	// Composite is the XRD's kind the XWidgets are written as.
	Composite CompositeKind `json:"composite"`

	// Labels are set in every written XWidget's spec.labels, over the
	// widget's own: the labels the platform's policy requires (such as
	// team), which a widget made outside Crossplane may lack.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Labels map[string]string `json:"labels,omitempty"`

	// MaxWidgets is the most XWidgets this operation may write: with more
	// to adopt, it fails and writes none. Defaults to 100; at most 500.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=500
	MaxWidgets *int32 `json:"maxWidgets,omitempty"`
}

// InventoryReference names a WidgetInventory.
type InventoryReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// CompositeKind is an XRD's namespaced composite kind.
type CompositeKind struct {
	// APIVersion such as platform.widgetco.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind such as XWidget.
	Kind string `json:"kind"`
}
