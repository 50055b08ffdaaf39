package v1alpha1

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A WidgetResource is a Widget managed resource of either scope. The
// namespaced and the cluster-scoped Widget kinds implement it, so a controller
// written against it serves both.
//
// +kubebuilder:object:generate=false
type WidgetResource interface {
	resource.Managed

	// GetWidgetParameters returns the widget settings the user asked for. The
	// returned pointer refers to the resource's own spec: changes made
	// through it, such as late initialization, change the resource.
	GetWidgetParameters() *WidgetParameters

	// GetWidgetObservation returns the widget as last observed. The returned
	// pointer refers to the resource's own status.
	GetWidgetObservation() *WidgetObservation

	// SetWidgetObservation replaces the observed state of the widget.
	SetWidgetObservation(o WidgetObservation)
}

// A WidgetKeyResource is a WidgetKey managed resource of either scope. The
// namespaced and the cluster-scoped WidgetKey kinds implement it, so a
// controller written against it serves both.
//
// +kubebuilder:object:generate=false
type WidgetKeyResource interface {
	resource.Managed

	// GetWidgetKeyParameters returns the key settings the user asked for
	// that do not depend on scope. The returned pointer refers to the
	// resource's own spec.
	GetWidgetKeyParameters() *WidgetKeyParameters

	// GetWidgetName returns the name of the widget the key belongs to, or ""
	// while the name is neither set nor resolved from a reference.
	GetWidgetName() string

	// GetWidgetKeyObservation returns the key as last observed. The returned
	// pointer refers to the resource's own status.
	GetWidgetKeyObservation() *WidgetKeyObservation

	// SetWidgetKeyObservation replaces the observed state of the key.
	SetWidgetKeyObservation(o WidgetKeyObservation)

	// ResolveReferences resolves the key's reference or selector to a Widget
	// of the same scope and sets the widget name from that Widget's external
	// name.
	ResolveReferences(ctx context.Context, c client.Reader) error
}

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
