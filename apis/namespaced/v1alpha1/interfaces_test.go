package v1alpha1

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
)

// The kinds satisfy crossplane-runtime's interfaces and the shared interfaces
// the scope-independent controllers use. These assertions live in a test file
// because angryjet must be able to load this package before it has generated
// the methods they need.
var (
	_ resource.ModernManaged                = &Widget{}
	_ resource.ModernManaged                = &WidgetKey{}
	_ resource.ManagedList                  = &WidgetList{}
	_ resource.ManagedList                  = &WidgetKeyList{}
	_ conversion.Convertible                = &Widget{}
	_ conversion.Convertible                = &WidgetKey{}
	_ resource.ProviderConfig               = &ProviderConfig{}
	_ resource.ProviderConfig               = &ClusterProviderConfig{}
	_ commonv1alpha1.ProviderConfigResource = &ProviderConfig{}
	_ commonv1alpha1.ProviderConfigResource = &ClusterProviderConfig{}
	_ resource.TypedProviderConfigUsage     = &ProviderConfigUsage{}
	_ resource.ProviderConfigUsageList      = &ProviderConfigUsageList{}
)
