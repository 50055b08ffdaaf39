package v1alpha1

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
)

// The kinds satisfy crossplane-runtime's interfaces and the shared interfaces
// the scope-independent controllers use. These assertions live in a test file
// because angryjet must be able to load this package before it has generated
// the methods they need. crossplane-runtime deprecates its legacy interfaces
// for new kinds; these kinds are legacy on purpose, for LegacyCluster XRs.
var (
	_ resource.LegacyManaged                = &Widget{}    //nolint:staticcheck // Legacy on purpose: LegacyCluster XRs compose these kinds.
	_ resource.LegacyManaged                = &WidgetKey{} //nolint:staticcheck // Legacy on purpose: LegacyCluster XRs compose these kinds.
	_ resource.ManagedList                  = &WidgetList{}
	_ resource.ManagedList                  = &WidgetKeyList{}
	_ conversion.Convertible                = &Widget{}
	_ conversion.Convertible                = &WidgetKey{}
	_ resource.ProviderConfig               = &ProviderConfig{}
	_ commonv1alpha1.ProviderConfigResource = &ProviderConfig{}
	_ resource.LegacyProviderConfigUsage    = &ProviderConfigUsage{} //nolint:staticcheck // Legacy on purpose: legacy MRs use untyped usages.
	_ resource.ProviderConfigUsageList      = &ProviderConfigUsageList{}
)
