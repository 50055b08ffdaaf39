package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindRotateKeys is the kind of the input that makes function-widget an
// operation function: a step of an Operation, CronOperation or
// WatchOperation (Crossplane's ops.crossplane.io) that rotates keys now.
const KindRotateKeys = "RotateKeys"

// Bounds of a RotateKeys operation.
const (
	// DefaultMaxTargets is how many objects one operation may change when
	// the input sets no maxTargets.
	DefaultMaxTargets = int32(1000)
	// MaxTargets is the most that maxTargets may allow: core lists every
	// object an Operation applied in its status, about 120 bytes each, and
	// the status must stay well within what etcd stores (1.5 MiB).
	MaxTargets = int32(5000)
	// MaxTargetsListed is the most target names the operation's output
	// lists; it counts the rest.
	MaxTargetsListed = 100
)

// RotateKeys asks, from an Operation, that the access keys of every XWidget
// or claim that target selects be rotated now, as each object's own
// spec.rotation.requestedAt does: the function sets that field (and
// revokePreviousAt, with revokePrevious) on each of them, and core applies
// it. The rotations themselves then run as any requested rotation: one new
// key per key, within the Widget API's rate limit, the replaced keys
// revoked after their overlap or at once.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=crossplane
type RotateKeys struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Target selects the objects whose keys are rotated. In a
	// WatchOperation, only the watched object is rotated, if it is of the
	// target's kind and matches it.
	Target RotationTarget `json:"target"`

	// RevokePrevious revokes each replaced key at once instead of after
	// its overlap, for keys that leaked: consumers that still use them
	// fail.
	// +optional
	RevokePrevious bool `json:"revokePrevious,omitempty"`

	// MaxTargets is the most objects this operation may change: when the
	// selector matches more, the operation fails and changes none. Defaults
	// to 1000; at most 5000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5000
	MaxTargets *int32 `json:"maxTargets,omitempty"`
}

// RotationTarget selects XWidgets or claims.
type RotationTarget struct {
	// APIVersion of the objects: the XRD's group and version, such as
	// platform.widgetco.io/v1alpha1.
	APIVersion string `json:"apiVersion"`

	// Kind of the objects: the XRD's kind (XWidget) or its claim's
	// (WidgetClaim).
	Kind string `json:"kind"`

	// Namespace of the objects. Unset, every namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// MatchLabels selects the objects by their labels. Unset, every object
	// of the kind (in the namespace).
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}
