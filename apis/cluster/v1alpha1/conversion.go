package v1alpha1

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
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
	dst, ok := hub.(*v1beta1.Widget)
	if !ok {
		return errors.Errorf("cannot convert a %s Widget to %T", Version, hub)
	}
	src, dst := convert.Objects(mg, WidgetGroupVersionKind, dst, v1beta1.WidgetGroupVersionKind)
	return convert.Run(src, dst, widgetConversions)
}

// ConvertFrom converts the hub version, v1beta1, to this Widget.
func (mg *Widget) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*v1beta1.Widget)
	if !ok {
		return errors.Errorf("cannot convert %T to a %s Widget", hub, Version)
	}
	src, dst := convert.Objects(src, v1beta1.WidgetGroupVersionKind, mg, WidgetGroupVersionKind)
	return convert.Run(src, dst, widgetConversions)
}

// ConvertTo converts this WidgetKey to the hub version, v1beta1.
func (mg *WidgetKey) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*v1beta1.WidgetKey)
	if !ok {
		return errors.Errorf("cannot convert a %s WidgetKey to %T", Version, hub)
	}
	src, dst := convert.Objects(mg, WidgetKeyGroupVersionKind, dst, v1beta1.WidgetKeyGroupVersionKind)
	return convert.Run(src, dst, widgetKeyConversions)
}

// ConvertFrom converts the hub version, v1beta1, to this WidgetKey.
func (mg *WidgetKey) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*v1beta1.WidgetKey)
	if !ok {
		return errors.Errorf("cannot convert %T to a %s WidgetKey", hub, Version)
	}
	src, dst := convert.Objects(src, v1beta1.WidgetKeyGroupVersionKind, mg, WidgetKeyGroupVersionKind)
	return convert.Run(src, dst, widgetKeyConversions)
}
