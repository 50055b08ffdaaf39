package v1alpha1

import (
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/upjet/v2/pkg/config/conversion"
	"k8s.io/apimachinery/pkg/util/validation/field"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// The versions WidgetConversions and WidgetKeyConversions convert between.
const (
	versionAlpha = "v1alpha1"
	versionBeta  = "v1beta1"
)

// WidgetConversions convert a Widget of either scope between v1alpha1 and
// v1beta1, which differ only in spec:
//
//   - v1alpha1's spec.forProvider.region is v1beta1's spec.initProvider.region.
//   - v1beta1's spec.initProvider.size, labels and description have no
//     v1alpha1 field: a v1alpha1 object keeps them in upjet's
//     field-conversions annotation, so they survive a round trip, and the
//     v1beta1 object gets them back from it (and loses the annotation).
//     The annotation is written by whoever writes the v1alpha1 object, and
//     the API server validates a write only against the schema of the
//     version it is made in: a v1alpha1 to v1beta1 conversion therefore
//     fails when the annotation holds a value v1beta1's schema would refuse
//     (see validateInitProvider), and the v1alpha1 write is refused with it.
//
// Everything else is copied as it is.
func WidgetConversions() []conversion.Conversion {
	initOnly := []string{"spec.initProvider.size", "spec.initProvider.labels", "spec.initProvider.description"}
	cs := []conversion.Conversion{
		conversion.NewIdentityConversionExpandPaths(versionAlpha, versionBeta, nil, "spec.forProvider.region"),
		conversion.NewFieldRenameConversion(versionAlpha, "spec.forProvider.region", versionBeta, "spec.initProvider.region"),
		conversion.NewIdentityConversionExpandPaths(versionBeta, versionAlpha, nil, "spec.initProvider"),
		conversion.NewFieldRenameConversion(versionBeta, "spec.initProvider.region", versionAlpha, "spec.forProvider.region"),
	}
	for _, p := range initOnly {
		cs = append(cs,
			conversion.NewNewlyIntroducedFieldConversion(versionBeta, versionAlpha, p, conversion.ToAnnotation),
			conversion.NewNewlyIntroducedFieldConversion(versionAlpha, versionBeta, p, conversion.FromAnnotation),
		)
	}
	return append(cs, conversion.NewCustomConverter(versionAlpha, versionBeta, func(_, target resource.Managed) error {
		w, ok := target.(commonv1beta1.WidgetResource)
		if !ok {
			return errors.Errorf("cannot validate %T: it is not a v1beta1 Widget", target)
		}
		if errs := validateInitProvider(w.GetWidgetInitParameters(), field.NewPath("spec", "initProvider")); len(errs) > 0 {
			return errors.Errorf("the %s annotation holds values v1beta1 refuses: %s", conversion.AnnotationKey, errs.ToAggregate())
		}
		return nil
	}))
}

// Rules of v1beta1's WidgetInitParameters that validateInitProvider checks,
// as the CRD states them (markers in package commonv1beta1).
const (
	maxInitLabels          = 31
	maxLabelValueChars     = 63
	maxDescriptionChars    = 256
	reservedLabelPrefix    = commonv1beta1.OwnershipLabelPrefix
	labelKeyRuleMessage    = "must be 1 to 63 characters of lowercase letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit"
	descriptionRuleMessage = "must hold only printable characters, spaces, tabs and newlines"
)

var (
	labelKey         = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`)
	printableOrSpace = regexp.MustCompile(`^[\p{L}\p{M}\p{N}\p{P}\p{S} \t\n]*$`)
)

// validateInitProvider checks the fields of p that a v1alpha1 Widget carries
// in its field-conversions annotation (size, labels, description) against
// v1beta1's schema, which the API server does not apply to them: a v1alpha1
// write is validated against v1alpha1's schema, which has no such fields.
// Each check mirrors a marker on commonv1beta1.WidgetInitParameters; the
// API server tests pin that both refuse the same values.
func validateInitProvider(p *commonv1beta1.WidgetInitParameters, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Values are omitted from the errors: the annotation is the writer's,
	// of any size, and the errors are logged as well as returned.
	omit := field.OmitValueType{}
	if p.Size != nil {
		switch *p.Size {
		case commonv1beta1.SizeSmall, commonv1beta1.SizeMedium, commonv1beta1.SizeLarge:
		default:
			errs = append(errs, field.NotSupported(path.Child("size"), omit, []string{commonv1beta1.SizeSmall, commonv1beta1.SizeMedium, commonv1beta1.SizeLarge}))
		}
	}
	if n := len(p.Labels); n > maxInitLabels {
		errs = append(errs, field.TooMany(path.Child("labels"), n, maxInitLabels))
	}
	keys := make([]string, 0, len(p.Labels))
	for k := range p.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case !labelKey.MatchString(k):
			errs = append(errs, field.Invalid(path.Child("labels"), omit, "label keys "+labelKeyRuleMessage))
		case strings.HasPrefix(k, reservedLabelPrefix):
			errs = append(errs, field.Invalid(path.Child("labels").Key(k), omit, "label keys with the prefix "+reservedLabelPrefix+" are reserved for the provider's ownership marker"))
		}
		if utf8.RuneCountInString(p.Labels[k]) > maxLabelValueChars {
			errs = append(errs, field.TooLong(path.Child("labels").Key(k), omit, maxLabelValueChars))
		}
	}
	if p.Description != nil {
		d := *p.Description
		if utf8.RuneCountInString(d) > maxDescriptionChars {
			errs = append(errs, field.TooLong(path.Child("description"), omit, maxDescriptionChars))
		}
		if !printableOrSpace.MatchString(d) {
			errs = append(errs, field.Invalid(path.Child("description"), omit, "description "+descriptionRuleMessage))
		}
	}
	return errs
}

// WidgetKeyConversions convert a WidgetKey of either scope between v1alpha1
// and v1beta1:
//
//   - v1alpha1's spec.forProvider.description is v1beta1's
//     spec.initProvider.description (the Widget API cannot change a key).
//   - v1beta1's spec.forProvider.rotation and the rotation status
//     (status.atProvider.name, previous, nextRotationAt,
//     rotationRequestedAt) have no v1alpha1 field: a v1alpha1 object keeps
//     them in upjet's field-conversions annotation, as a Widget keeps its
//     initProvider fields. A v1alpha1 write is validated only against
//     v1alpha1's schema, so a rotation from the annotation is checked
//     against v1beta1's rules (see validateRotation) and refused with the
//     write when it breaks them.
//
// Everything else is copied as it is.
func WidgetKeyConversions() []conversion.Conversion {
	cs := []conversion.Conversion{
		conversion.NewIdentityConversionExpandPaths(versionAlpha, versionBeta, nil, "spec.forProvider.description"),
		conversion.NewFieldRenameConversion(versionAlpha, "spec.forProvider.description", versionBeta, "spec.initProvider.description"),
		conversion.NewIdentityConversionExpandPaths(versionBeta, versionAlpha, nil, "spec.initProvider"),
		conversion.NewFieldRenameConversion(versionBeta, "spec.initProvider.description", versionAlpha, "spec.forProvider.description"),
	}
	for _, p := range []string{
		"spec.forProvider.rotation",
		"status.atProvider.name",
		"status.atProvider.previous",
		"status.atProvider.nextRotationAt",
		"status.atProvider.rotationRequestedAt",
	} {
		cs = append(cs,
			conversion.NewNewlyIntroducedFieldConversion(versionBeta, versionAlpha, p, conversion.ToAnnotation),
			conversion.NewNewlyIntroducedFieldConversion(versionAlpha, versionBeta, p, conversion.FromAnnotation),
		)
	}
	return append(cs, conversion.NewCustomConverter(versionAlpha, versionBeta, func(_, target resource.Managed) error {
		k, ok := target.(commonv1beta1.WidgetKeyResource)
		if !ok {
			return errors.Errorf("cannot validate %T: it is not a v1beta1 WidgetKey", target)
		}
		if errs := validateRotation(k, field.NewPath("spec", "forProvider", "rotation")); len(errs) > 0 {
			return errors.Errorf("the %s annotation holds values v1beta1 refuses: %s", conversion.AnnotationKey, errs.ToAggregate())
		}
		return nil
	}))
}

// validateRotation checks k's spec.forProvider.rotation, which a v1alpha1
// WidgetKey carries in its field-conversions annotation, against the rules
// v1beta1's schema states for its values (markers on
// commonv1beta1.KeyRotation); the API server tests pin that both refuse the
// same values. The rules across spec fields (a connection Secret, management
// policies) are the provider's to enforce for such an object, as a Widget's
// size requirement is.
func validateRotation(k commonv1beta1.WidgetKeyResource, path *field.Path) field.ErrorList {
	r := k.GetKeyRotation()
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	omit := field.OmitValueType{}
	between := func(p *field.Path, d time.Duration, lo, hi string, what string) {
		minD, _ := time.ParseDuration(lo)
		maxD, _ := time.ParseDuration(hi)
		if d < minD || d > maxD {
			errs = append(errs, field.Invalid(p, omit, what+" must be from "+lo+" to "+hi))
		}
	}
	between(path.Child("overlap"), r.Overlap.Duration, commonv1beta1.MinRotationOverlap, commonv1beta1.MaxRotationPeriod, "overlap")
	if r.Period != nil {
		between(path.Child("period"), r.Period.Duration, commonv1beta1.MinRotationPeriod, commonv1beta1.MaxRotationPeriod, "period")
		if r.Overlap.Duration >= r.Period.Duration {
			errs = append(errs, field.Invalid(path.Child("overlap"), omit, "overlap must be shorter than period"))
		}
	}
	return errs
}
