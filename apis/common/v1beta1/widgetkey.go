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

	// Name is the current key's name in the Widget API: the external name
	// until the first rotation, then a name derived from it.
	// +optional
	Name string `json:"name,omitempty"`

	// Previous is the key the last rotation replaced, while it is still
	// valid (its secret is previousKey in the connection Secret).
	// +optional
	Previous *PreviousKeyObservation `json:"previous,omitempty"`

	// NextRotationAt is when the key is rotated next: the period after it
	// was created, or the time requested, whichever is first.
	// +optional
	NextRotationAt *metav1.Time `json:"nextRotationAt,omitempty"`

	// RotationRequestedAt is the last spec.forProvider.rotation.requestedAt
	// that a rotation honoured.
	// +optional
	RotationRequestedAt *metav1.Time `json:"rotationRequestedAt,omitempty"`
}

// Bounds of a KeyRotation, as the CRD enforces them (and the v1alpha1
// conversion, for values carried in its field-conversions annotation).
const (
	// MinRotationPeriod is the shortest period: rotating more often than
	// hourly buys no security and costs every consumer a reload per hour.
	MinRotationPeriod = "1h"
	// MaxRotationPeriod is the longest period: ten years.
	MaxRotationPeriod = "87600h"
	// MinRotationOverlap is the shortest overlap: the kubelet takes up to
	// a minute or two to refresh a mounted Secret, and consumers need time
	// to reload it before the previous key is revoked.
	MinRotationOverlap = "5m"
)

// KeyRotation says when the provider replaces a WidgetKey's key with a new
// one, without downtime: it creates the new key, writes it to the connection
// Secret as key (the previous one moves to previousKey), and revokes the
// previous key only once the overlap has passed.
//
// +kubebuilder:validation:XValidation:rule="!has(self.period) || duration(self.overlap) < duration(self.period)",message="overlap must be shorter than period: the previous key is revoked overlap after a rotation, before the next rotation is due"
type KeyRotation struct {
	// Period is how long a key is used before the provider rotates it,
	// counted from the key's creation in the Widget API: a Go duration
	// such as 720h, from 1h to 87600h. Unset, keys are rotated only on
	// request (requestedAt).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="period must be at least 1h: rotating more often costs every consumer a reload and buys no security"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('87600h')",message="period must be at most 87600h (ten years)"
	Period *metav1.Duration `json:"period,omitempty"`

	// Overlap is how long the previous key stays valid after a rotation,
	// published as previousKey in the connection Secret, so that every
	// consumer can switch to the new key before the previous one is
	// revoked: a Go duration such as 24h, at least 5m and shorter than
	// period.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5m')",message="overlap must be at least 5m: consumers need time to read the new key from the connection Secret before the previous key is revoked"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('87600h')",message="overlap must be at most 87600h (ten years)"
	Overlap metav1.Duration `json:"overlap"`

	// RequestedAt asks for a rotation now, as kubectl rollout restart
	// does for a Deployment: set it to the current time (kubectl patch
	// ... -p '{"spec":{"forProvider":{"rotation":{"requestedAt":"'$(date -u +%FT%TZ)'"}}}}').
	// The key is rotated once when requestedAt is later than the current
	// key's creation and not in the future; a time in the future schedules
	// the rotation. A rotation waits while the previous key is still in
	// its overlap.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`

	// RevokePreviousAt cuts the overlap short, for a key that leaked: the
	// previous key is revoked at this time instead of at the end of its
	// overlap, if it was created at or before it. Set it, with
	// requestedAt, to the current time to replace the current key and
	// revoke it at once (consumers still using it then fail: this trades
	// availability for containment). It applies only to keys that existed
	// at that time, so a value left in place never shortens the overlap
	// of a later rotation.
	// +optional
	RevokePreviousAt *metav1.Time `json:"revokePreviousAt,omitempty"`
}

// PreviousKeyObservation is the key that the last rotation replaced, valid
// until it is revoked.
type PreviousKeyObservation struct {
	// Name of the key in the Widget API.
	// +optional
	Name string `json:"name,omitempty"`

	// ID the Widget API assigned to the key.
	// +optional
	ID string `json:"id,omitempty"`

	// CreatedAt is when the key was created.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`

	// RevokeAt is when the provider revokes the key: the overlap after
	// the current key was created.
	// +optional
	RevokeAt *metav1.Time `json:"revokeAt,omitempty"`
}
