package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	"github.com/widgetco/crossplane-widget/apis/internal/convert"
)

// Conversions for Widget and WidgetKey are upjet's, listed in
// commonv1alpha1.WidgetConversions and WidgetKeyConversions.
var (
	widgetConversions    = commonv1alpha1.WidgetConversions()
	widgetKeyConversions = commonv1alpha1.WidgetKeyConversions()
)

// ConvertTo converts this Widget to the hub version, v1beta1.
func (mg *Widget) ConvertTo(hub conversion.Hub) error {
	return convert.ToHub[*v1beta1.Widget](mg, WidgetGroupVersionKind, hub, v1beta1.WidgetGroupVersionKind, widgetConversions)
}

// ConvertFrom converts the hub version, v1beta1, to this Widget.
func (mg *Widget) ConvertFrom(hub conversion.Hub) error {
	return convert.FromHub[*v1beta1.Widget](hub, v1beta1.WidgetGroupVersionKind, mg, WidgetGroupVersionKind, widgetConversions)
}

// ConvertTo converts this WidgetKey to the hub version, v1beta1.
func (mg *WidgetKey) ConvertTo(hub conversion.Hub) error {
	return convert.ToHub[*v1beta1.WidgetKey](mg, WidgetKeyGroupVersionKind, hub, v1beta1.WidgetKeyGroupVersionKind, widgetKeyConversions)
}

// ConvertFrom converts the hub version, v1beta1, to this WidgetKey.
func (mg *WidgetKey) ConvertFrom(hub conversion.Hub) error {
	return convert.FromHub[*v1beta1.WidgetKey](hub, v1beta1.WidgetKeyGroupVersionKind, mg, WidgetKeyGroupVersionKind, widgetKeyConversions)
}
