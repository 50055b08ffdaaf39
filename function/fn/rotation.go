package fn

import (
	"fmt"
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// Key rotation through the platform API: an XWidget's spec.rotation, within
// the bounds of the platform's WidgetPolicy (rotation), becomes the
// spec.forProvider.rotation of every WidgetKey it composes. The provider
// rotates each key without downtime (see docs/provider.md#key-rotation); the
// function only decides the settings and checks them. A rejected request is
// a fatal result, so Crossplane changes no WidgetKey and nothing is revoked.

// rotationSpec is spec.rotation as an app team writes it. Durations are Go
// durations; times are RFC 3339.
type rotationSpec struct {
	Period           *string `json:"period,omitempty"`
	Overlap          *string `json:"overlap,omitempty"`
	RequestedAt      *string `json:"requestedAt,omitempty"`
	RevokePreviousAt *string `json:"revokePreviousAt,omitempty"`
}

// maxDurationLength is the longest duration string the function parses, as
// the XRD and the WidgetKey CRD allow.
const maxDurationLength = 32

// A rotationPolicy is the WidgetPolicy's rotation with its defaults applied.
type rotationPolicy struct {
	// defaultPeriod is zero when keys rotate only on request by default.
	defaultPeriod  time.Duration
	defaultOverlap time.Duration
	minPeriod      time.Duration
	maxPeriod      time.Duration
	// maxOverlap is zero when any overlap shorter than the period goes.
	maxOverlap time.Duration
}

// newRotationPolicy applies the defaults to a valid RotationPolicy.
func newRotationPolicy(in v1beta1.RotationPolicy) rotationPolicy {
	d := func(v *metav1.Duration, def time.Duration) time.Duration {
		if v == nil {
			return def
		}
		return v.Duration
	}
	return rotationPolicy{
		defaultPeriod:  d(in.DefaultPeriod, 0),
		defaultOverlap: d(in.DefaultOverlap, v1beta1.DefaultRotationOverlap),
		minPeriod:      d(in.MinPeriod, v1beta1.MinRotationPeriod),
		maxPeriod:      d(in.MaxPeriod, v1beta1.MaxRotationPeriod),
		maxOverlap:     d(in.MaxOverlap, 0),
	}
}

// validateRotationPolicy returns every invalid field of the WidgetPolicy's
// rotation: each duration within the WidgetKey's bounds, the bounds in
// order, and the defaults within the bounds.
func validateRotationPolicy(in v1beta1.RotationPolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Every duration is at most a WidgetKey's longest period.
	hi := v1beta1.MaxRotationPeriod
	within := func(v *metav1.Duration, name string, lo time.Duration) bool {
		if v == nil {
			return true
		}
		if v.Duration < lo || v.Duration > hi {
			errs = append(errs, field.Invalid(p.Child(name), formatDuration(v.Duration), fmt.Sprintf("must be from %s to %s, as a WidgetKey allows", formatDuration(lo), formatDuration(hi))))
			return false
		}
		return true
	}
	okMin := within(in.MinPeriod, "minPeriod", v1beta1.MinRotationPeriod)
	okMax := within(in.MaxPeriod, "maxPeriod", v1beta1.MinRotationPeriod)
	okPeriod := within(in.DefaultPeriod, "defaultPeriod", v1beta1.MinRotationPeriod)
	okOverlap := within(in.DefaultOverlap, "defaultOverlap", v1beta1.MinRotationOverlap)
	within(in.MaxOverlap, "maxOverlap", v1beta1.MinRotationOverlap)
	if len(errs) > 0 {
		return errs
	}
	r := newRotationPolicy(in)
	if okMin && okMax && r.minPeriod > r.maxPeriod {
		errs = append(errs, field.Invalid(p.Child("minPeriod"), formatDuration(r.minPeriod), fmt.Sprintf("must not be longer than maxPeriod (%s)", formatDuration(r.maxPeriod))))
		return errs
	}
	if okPeriod && in.DefaultPeriod != nil && (r.defaultPeriod < r.minPeriod || r.defaultPeriod > r.maxPeriod) {
		errs = append(errs, field.Invalid(p.Child("defaultPeriod"), formatDuration(r.defaultPeriod), fmt.Sprintf("must be from minPeriod (%s) to maxPeriod (%s)", formatDuration(r.minPeriod), formatDuration(r.maxPeriod))))
	}
	if okOverlap && in.DefaultOverlap != nil {
		switch {
		case r.maxOverlap > 0 && r.defaultOverlap > r.maxOverlap:
			errs = append(errs, field.Invalid(p.Child("defaultOverlap"), formatDuration(r.defaultOverlap), fmt.Sprintf("must not be longer than maxOverlap (%s)", formatDuration(r.maxOverlap))))
		case r.defaultOverlap >= r.minPeriod:
			errs = append(errs, field.Invalid(p.Child("defaultOverlap"), formatDuration(r.defaultOverlap), fmt.Sprintf("must be shorter than minPeriod (%s), so that it is shorter than every period an XWidget may ask for", formatDuration(r.minPeriod))))
		}
	}
	if in.DefaultOverlap == nil && r.maxOverlap > 0 && r.defaultOverlap > r.maxOverlap {
		errs = append(errs, field.Required(p.Child("defaultOverlap"), fmt.Sprintf("maxOverlap (%s) is shorter than the built-in default overlap (%s), so set a default overlap it allows", formatDuration(r.maxOverlap), formatDuration(r.defaultOverlap))))
	}
	return errs
}

// A keyRotation is how the XR's keys rotate: nil when they do not.
type keyRotation = commonv1beta1.KeyRotation

// resolveRotation reads spec.rotation, applies the policy's defaults and
// checks the result against the policy's bounds. Keys rotate when the XR
// sets spec.rotation or the policy a default period.
func resolveRotation(s *settings, x xwidget, pol rotationPolicy, p *field.Path) field.ErrorList {
	in := x.spec.Rotation
	if in == nil && pol.defaultPeriod == 0 {
		return nil
	}
	if in == nil {
		in = &rotationSpec{}
	}
	var errs field.ErrorList
	r := &keyRotation{Overlap: metav1.Duration{Duration: pol.defaultOverlap}}
	if pol.defaultPeriod > 0 {
		r.Period = &metav1.Duration{Duration: pol.defaultPeriod}
	}

	if in.Period != nil {
		d, err := parseDuration(*in.Period, p.Child("period"))
		switch {
		case err != nil:
			errs = append(errs, err)
		case d < pol.minPeriod || d > pol.maxPeriod:
			errs = append(errs, field.Invalid(p.Child("period"), *in.Period, fmt.Sprintf("the platform allows periods from %s to %s", formatDuration(pol.minPeriod), formatDuration(pol.maxPeriod))))
		default:
			r.Period = &metav1.Duration{Duration: d}
		}
	}
	overlapSet := in.Overlap != nil
	if overlapSet {
		d, err := parseDuration(*in.Overlap, p.Child("overlap"))
		switch {
		case err != nil:
			errs = append(errs, err)
		case d < v1beta1.MinRotationOverlap:
			errs = append(errs, field.Invalid(p.Child("overlap"), *in.Overlap, fmt.Sprintf("must be at least %s: consumers need time to read the new key from the connection Secret before the previous key is revoked", formatDuration(v1beta1.MinRotationOverlap))))
		case pol.maxOverlap > 0 && d > pol.maxOverlap:
			errs = append(errs, field.Invalid(p.Child("overlap"), *in.Overlap, fmt.Sprintf("the platform allows overlaps up to %s: a replaced key may not stay valid longer", formatDuration(pol.maxOverlap))))
		default:
			r.Overlap = metav1.Duration{Duration: d}
		}
	}
	if len(errs) == 0 && r.Period != nil && r.Overlap.Duration >= r.Period.Duration {
		if overlapSet {
			errs = append(errs, field.Invalid(p.Child("overlap"), *in.Overlap, fmt.Sprintf("must be shorter than the period (%s): the previous key is revoked overlap after a rotation, before the next rotation is due", formatDuration(r.Period.Duration))))
		} else {
			errs = append(errs, field.Required(p.Child("overlap"), fmt.Sprintf("the platform's default overlap (%s) is not shorter than the period (%s): set an overlap shorter than the period", formatDuration(r.Overlap.Duration), formatDuration(r.Period.Duration))))
		}
	}
	r.RequestedAt, errs = parseTime(in.RequestedAt, p.Child("requestedAt"), errs)
	r.RevokePreviousAt, errs = parseTime(in.RevokePreviousAt, p.Child("revokePreviousAt"), errs)
	s.rotation = r
	return errs
}

// parseDuration parses a Go duration that an XR sets.
func parseDuration(v string, p *field.Path) (time.Duration, *field.Error) {
	if len(v) > maxDurationLength {
		return 0, field.TooLong(p, "", maxDurationLength)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, field.Invalid(p, text.Shown(v), "must be a positive Go duration, such as 720h or 30m")
	}
	return d, nil
}

// parseTime parses an RFC 3339 time that an XR sets, if it sets one.
func parseTime(v *string, p *field.Path, errs field.ErrorList) (*metav1.Time, field.ErrorList) {
	if v == nil {
		return nil, errs
	}
	t, err := time.Parse(time.RFC3339, *v)
	if err != nil {
		return nil, append(errs, field.Invalid(p, text.Shown(*v), "must be a time such as 2026-11-27T10:00:00Z: set it to the current time to rotate now"))
	}
	m := metav1.NewTime(t.UTC())
	return &m, errs
}

// XR status fields of key rotation.
const (
	statusNextRotationAt = "status.rotation.nextRotationAt"
	statusPreviousRevoke = "status.rotation.previousKeysRevokeAt"
)

// applyRotation writes s.rotation to every composed WidgetKey, and reports
// in the XR's status when its keys rotate next and, during an overlap, when
// the replaced keys are revoked: the earliest of its WidgetKeys' times.
func applyRotation(o *outcome, s settings, obs observedResources) error {
	if err := rotationStatus(o, s, obs); err != nil {
		return err
	}
	if s.rotation == nil {
		return nil
	}
	r := s.rotation
	v := map[string]any{"overlap": formatDuration(r.Overlap.Duration)}
	if r.Period != nil {
		v["period"] = formatDuration(r.Period.Duration)
	}
	if r.RequestedAt != nil {
		v["requestedAt"] = r.RequestedAt.UTC().Format(time.RFC3339)
	}
	if r.RevokePreviousAt != nil {
		v["revokePreviousAt"] = r.RevokePreviousAt.UTC().Format(time.RFC3339)
	}
	for i := range s.keys {
		cd, ok := o.composed[keyResourceName(i)]
		if !ok {
			continue
		}
		if err := cd.Resource.SetValue("spec.forProvider.rotation", v); err != nil {
			return errors.Wrapf(err, "cannot set the key rotation of %s", keyResourceName(i))
		}
	}
	return nil
}

// rotationStatus sets the XR's rotation status from the observed
// WidgetKeys; it sets nothing while no key reports a schedule.
func rotationStatus(o *outcome, s settings, obs observedResources) error {
	var next, revoke time.Time
	earliest := func(t *time.Time, v *metav1.Time) {
		if v != nil && (t.IsZero() || v.Time.Before(*t)) {
			*t = v.Time
		}
	}
	for i := range s.keys {
		k, ok := obs.get(keyResourceName(i))
		if !ok {
			continue
		}
		var at commonv1beta1.WidgetKeyObservation
		if err := k.Resource.GetValueInto("status.atProvider", &at); err != nil {
			continue
		}
		earliest(&next, at.NextRotationAt)
		if at.Previous != nil {
			earliest(&revoke, at.Previous.RevokeAt)
		}
	}
	for f, t := range map[string]time.Time{statusNextRotationAt: next, statusPreviousRevoke: revoke} {
		if t.IsZero() {
			continue
		}
		if err := o.xr.Resource.SetString(f, t.UTC().Format(time.RFC3339)); err != nil {
			return errors.Wrapf(err, "cannot set %s", f)
		}
	}
	return nil
}

// formatDuration writes d as people write durations: 720h, not 720h0m0s.
func formatDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
