package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Widget sizes accepted by the Widget API.
const (
	SizeSmall  = "small"
	SizeMedium = "medium"
	SizeLarge  = "large"
)

// OwnershipLabelPrefix is the label key prefix reserved for the provider. The
// provider marks every widget it creates or adopts with a label under this
// prefix, so users cannot set labels with it.
const OwnershipLabelPrefix = "widgetco.io/"

// WidgetState is the lifecycle state of a widget, as the Widget API reports
// it. The API drives it; Crossplane only observes it.
type WidgetState string

// Widget lifecycle states.
const (
	// WidgetStateProvisioning means the widget was created but is not usable
	// yet.
	WidgetStateProvisioning WidgetState = "Provisioning"
	// WidgetStateReady means the widget is usable and its endpoint is set.
	WidgetStateReady WidgetState = "Ready"
	// WidgetStateResizing means a size change is being applied. The widget
	// keeps serving meanwhile.
	WidgetStateResizing WidgetState = "Resizing"
	// WidgetStateFailed means provisioning failed; the observation's message
	// says why.
	WidgetStateFailed WidgetState = "Failed"
	// WidgetStateDeleting means the API accepted the widget's deletion.
	WidgetStateDeleting WidgetState = "Deleting"
)

// WidgetParameters are the widget settings that Crossplane manages: it
// creates the widget with them and repairs any difference from them. A field
// left unset here is not managed: a new widget gets the value from
// spec.initProvider or the Widget API's default, an adopted widget keeps its
// value.
type WidgetParameters struct {
	// Size of the widget: small, medium or large. Required, here or in
	// spec.initProvider, unless the resource only observes the widget.
	// Changing it resizes the widget in place; its state is Resizing until
	// the new size is applied.
	// +optional
	// +kubebuilder:validation:Enum=small;medium;large
	Size *string `json:"size,omitempty"`

	// Labels to set on the widget: at most 31 (the Widget API allows 32 and
	// the provider adds one, its ownership marker). A key is 1 to 63 lowercase
	// letters, digits, '.', '_', '-' or '/', starting and ending with a letter
	// or digit; a value is at most 63 characters, and the Widget API also
	// requires it to be printable and at most 63 bytes long. Keys with the
	// prefix widgetco.io/ are reserved for the provider, which uses one to
	// record which managed resource owns the widget.
	// +optional
	// +kubebuilder:validation:MaxProperties=31
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$'))",message="label keys must be 1 to 63 characters of lowercase letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('widgetco.io/'))",message="label keys with the prefix widgetco.io/ are reserved for the provider's ownership marker: use another prefix"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="label values must be at most 63 characters"
	Labels map[string]string `json:"labels,omitempty"`

	// Description of the widget: at most 256 printable characters, spaces,
	// tabs and newlines.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^[\\p{L}\\p{M}\\p{N}\\p{P}\\p{S} \\t\\n]*$')",message="description must hold only printable characters, spaces, tabs and newlines"
	Description *string `json:"description,omitempty"`
}

// WidgetInitParameters are used only when Crossplane creates the widget, and
// never compared with it afterwards: set here what the Widget API (or
// someone using it) may change later without Crossplane changing it back.
// Where a field is set both here and in spec.forProvider, forProvider wins.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.region) || (has(self.region) && self.region == oldSelf.region)",message="region is immutable once set: delete and recreate the Widget to move it to another region"
type WidgetInitParameters struct {
	// Region the widget runs in, such as eu-west-1. When unset the Widget API
	// picks its default region. A widget's region is fixed when it is
	// created: once set here it cannot be changed or removed.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]+(-[a-z]+)*-[0-9]+$`
	Region *string `json:"region,omitempty"`

	// Size of the widget when it is created: small, medium or large.
	// +optional
	// +kubebuilder:validation:Enum=small;medium;large
	Size *string `json:"size,omitempty"`

	// Labels of the widget when it is created, with the same rules as
	// spec.forProvider.labels, used only when spec.forProvider.labels is
	// unset (labels are one field: they are not merged).
	// +optional
	// +kubebuilder:validation:MaxProperties=31
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$'))",message="label keys must be 1 to 63 characters of lowercase letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('widgetco.io/'))",message="label keys with the prefix widgetco.io/ are reserved for the provider's ownership marker: use another prefix"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="label values must be at most 63 characters"
	Labels map[string]string `json:"labels,omitempty"`

	// Description of the widget when it is created: at most 256 printable
	// characters, spaces, tabs and newlines.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^[\\p{L}\\p{M}\\p{N}\\p{P}\\p{S} \\t\\n]*$')",message="description must hold only printable characters, spaces, tabs and newlines"
	Description *string `json:"description,omitempty"`
}

// WidgetObservation is the widget as the Widget API last reported it.
type WidgetObservation struct {
	// ID the Widget API assigned to the widget. It never changes.
	// +optional
	ID string `json:"id,omitempty"`

	// State of the widget: Provisioning, Ready, Resizing, Failed or Deleting.
	// The widget is usable only when it is Ready.
	// +optional
	State WidgetState `json:"state,omitempty"`

	// Message from the Widget API explaining the state, set when the widget
	// is Failed.
	// +optional
	Message string `json:"message,omitempty"`

	// Endpoint the widget serves on. Set once the widget is Ready.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Generation of the widget in the Widget API. The API increments it on
	// every change to size, labels or description.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// Size of the widget.
	// +optional
	Size string `json:"size,omitempty"`

	// Region the widget runs in.
	// +optional
	Region string `json:"region,omitempty"`

	// Labels of the widget, including the provider's ownership marker.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Description of the widget.
	// +optional
	Description string `json:"description,omitempty"`

	// CreatedAt is when the widget was created.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`

	// UpdatedAt is when the widget's settings or state last changed.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
}

// MaxDriftChangeLength bounds DriftRepairs.LastChange, in characters.
const MaxDriftChangeLength = 256

// DriftRepairs records what the provider restored of a widget that was
// changed outside Crossplane.
type DriftRepairs struct {
	// Count of repairs since the resource was created or restored.
	Count int64 `json:"count"`

	// LastAt is when the provider last restored the widget.
	LastAt metav1.Time `json:"lastAt"`

	// LastChange is what the last repair restored, as the field, the value
	// found and the value of the spec (at most 256 characters).
	// +optional
	LastChange string `json:"lastChange,omitempty"`
}
