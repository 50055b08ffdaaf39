package v1alpha1

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// A ProviderConfigResource is any of the provider's ProviderConfig kinds: the
// namespaced ProviderConfig, the ClusterProviderConfig, or the cluster-scoped
// legacy ProviderConfig.
//
// +kubebuilder:object:generate=false
type ProviderConfigResource interface {
	resource.ProviderConfig

	// GetProviderConfigSpec returns a copy of the configuration in the
	// cluster-scoped form. For a namespaced ProviderConfig its Secret
	// reference points into the ProviderConfig's own namespace.
	GetProviderConfigSpec() ProviderConfigSpec
}
