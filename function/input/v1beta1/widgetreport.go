package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindWidgetReport is the kind of the operation input that reports on the
// XWidgets or claims a selector matches.
const KindWidgetReport = "WidgetReport"

// Bounds of a WidgetReport.
const (
	// DefaultMaxEntries is how many findings the report lists when the
	// input sets no maxEntries; every finding is counted.
	DefaultMaxEntries = int32(100)
	// MaxEntries is the most findings a report may list: the Operation's
	// status holds the report.
	MaxEntries = int32(500)
	// MaxMessageLength is the longest message a finding quotes.
	MaxMessageLength = 256
)

// WidgetReport writes, from an Operation (a CronOperation, say, every
// week), a report of the XWidgets or claims that target selects into the
// Operation's output: those that are not Ready, those the platform's policy
// or a namespace quota refuses, those whose key rotation is overdue, and
// those whose widget the provider restored lately after a change made
// outside Crossplane (drift); and, from the WidgetInventories of target's namespace (or of every
// namespace), how many widgets no resource manages. It changes nothing.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=crossplane
type WidgetReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Target selects the objects reported on.
	Target RotationTarget `json:"target"`

	// OverdueAfter is how long after status.rotation.nextRotationAt a
	// rotation that has not happened counts as overdue. Defaults to 1h.
	// +optional
	OverdueAfter *metav1.Duration `json:"overdueAfter,omitempty"`

	// DriftWithin is how recent the provider's last repair of a widget
	// changed outside Crossplane must be to be reported. Defaults to 24h.
	// +optional
	DriftWithin *metav1.Duration `json:"driftWithin,omitempty"`

	// MaxEntries is the most findings the report lists; the counts hold
	// them all. Defaults to 100; at most 500.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=500
	MaxEntries *int32 `json:"maxEntries,omitempty"`
}
