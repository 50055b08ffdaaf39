package v1alpha1

import (
	"github.com/crossplane/upjet/v2/pkg/config/conversion"

	"github.com/widgetco/crossplane-widget/apis/internal/convert"
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
	return append(cs, convert.RemoveAnnotation(versionAlpha, versionBeta))
}

// WidgetKeyConversions convert a WidgetKey of either scope between v1alpha1
// and v1beta1: v1alpha1's spec.forProvider.description is v1beta1's
// spec.initProvider.description (the Widget API cannot change a key).
// Everything else is copied as it is.
func WidgetKeyConversions() []conversion.Conversion {
	return []conversion.Conversion{
		conversion.NewIdentityConversionExpandPaths(versionAlpha, versionBeta, nil, "spec.forProvider.description"),
		conversion.NewFieldRenameConversion(versionAlpha, "spec.forProvider.description", versionBeta, "spec.initProvider.description"),
		conversion.NewIdentityConversionExpandPaths(versionBeta, versionAlpha, nil, "spec.initProvider"),
		conversion.NewFieldRenameConversion(versionBeta, "spec.initProvider.description", versionAlpha, "spec.forProvider.description"),
	}
}
