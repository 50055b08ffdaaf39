package v1beta1

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// The kinds satisfy crossplane-runtime's interfaces, the shared interfaces
// the scope-independent controllers use, and controller-runtime's conversion
// hub. These assertions live in a test file because angryjet must be able to
// load this package before it has generated the methods they need.
var (
	_ resource.LegacyManaged          = &Widget{}    //nolint:staticcheck // Legacy on purpose: LegacyCluster XRs compose these kinds.
	_ resource.LegacyManaged          = &WidgetKey{} //nolint:staticcheck // Legacy on purpose: LegacyCluster XRs compose these kinds.
	_ resource.ManagedList            = &WidgetList{}
	_ resource.ManagedList            = &WidgetKeyList{}
	_ commonv1beta1.WidgetResource    = &Widget{}
	_ commonv1beta1.WidgetKeyResource = &WidgetKey{}
	_ conversion.Hub                  = &Widget{}
	_ conversion.Hub                  = &WidgetKey{}
)
