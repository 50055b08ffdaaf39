package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Built-in rotation settings and the WidgetKey's own bounds, which no
// policy can widen (the provider's CRD refuses anything else).
const (
	// DefaultRotationOverlap is the overlap of an XWidget's rotating keys
	// when neither the XWidget nor rotation.defaultOverlap sets one.
	DefaultRotationOverlap = 24 * time.Hour

	// MinRotationPeriod, MaxRotationPeriod and MinRotationOverlap are
	// the WidgetKey's bounds (spec.forProvider.rotation).
	MinRotationPeriod  = time.Hour
	MaxRotationPeriod  = 87600 * time.Hour
	MinRotationOverlap = 5 * time.Minute
)

// RotationPolicy is how the access keys of every XWidget are rotated: a
// default the XWidget may override (spec.rotation), and the bounds the
// XWidget's values must stay within. Every field is optional; durations are
// Go durations such as 720h. Unset, keys rotate only when the XWidget asks
// (spec.rotation), within the WidgetKey's own bounds: a period from 1h to
// 87600h, an overlap of at least 5m and shorter than the period.
type RotationPolicy struct {
	// DefaultPeriod is the rotation period of the keys of an XWidget that
	// sets none (spec.rotation.period). Unset, such keys are rotated only
	// on request (spec.rotation.requestedAt). Changing it reschedules the
	// next rotation of every XWidget that sets no period.
	// +optional
	DefaultPeriod *metav1.Duration `json:"defaultPeriod,omitempty"`

	// DefaultOverlap is how long the previous key stays valid after a
	// rotation, for an XWidget that sets no spec.rotation.overlap.
	// Defaults to 24h. It must be shorter than every period the policy
	// allows.
	// +optional
	DefaultOverlap *metav1.Duration `json:"defaultOverlap,omitempty"`

	// MinPeriod is the shortest period an XWidget may ask for. Defaults
	// to 1h, the WidgetKey's minimum.
	// +optional
	MinPeriod *metav1.Duration `json:"minPeriod,omitempty"`

	// MaxPeriod is the longest period an XWidget may ask for, such as
	// 2160h for "rotate at least every 90 days". Defaults to 87600h, the
	// WidgetKey's maximum.
	// +optional
	MaxPeriod *metav1.Duration `json:"maxPeriod,omitempty"`

	// MaxOverlap is the longest overlap an XWidget may ask for: how long a
	// replaced key may stay valid. Unset, any overlap shorter than the
	// period is allowed.
	// +optional
	MaxOverlap *metav1.Duration `json:"maxOverlap,omitempty"`
}
