package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WidgetKeyParameters are the access key settings that do not depend on the
// managed resource's scope. Each scope's WidgetKeyParameters embeds them and
// adds how the key names its widget, because references to a Widget differ
// between scopes.
type WidgetKeyParameters struct {
	// Description of the key: at most 256 printable characters, spaces, tabs
	// and newlines. The Widget API cannot change a key, so the description is
	// fixed once the key exists.
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
