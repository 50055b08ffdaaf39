package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WidgetKeyInitParameters are the access key settings used only when the key
// is created: the Widget API cannot change a key, so they are fixed once the
// key exists.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.description) || (has(self.description) && self.description == oldSelf.description)",message="description is immutable once set: the Widget API cannot change a key; delete and recreate the WidgetKey"
type WidgetKeyInitParameters struct {
	// Description of the key: at most 256 printable characters, spaces, tabs
	// and newlines.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^[\\p{L}\\p{M}\\p{N}\\p{P}\\p{S} \\t\\n]*$')",message="description must hold only printable characters, spaces, tabs and newlines"
	Description *string `json:"description,omitempty"`
}

// WidgetKeyObservation is the access key as the Widget API last reported it.
// The key's secret is never part of it: it is written only to the connection
// secret.
type WidgetKeyObservation struct {
	// ID the Widget API assigned to the key.
	// +optional
	ID string `json:"id,omitempty"`

	// WidgetName is the name of the widget the key belongs to.
	// +optional
	WidgetName string `json:"widgetName,omitempty"`

	// Description of the key.
	// +optional
	Description string `json:"description,omitempty"`

	// CreatedAt is when the key was created.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
}
