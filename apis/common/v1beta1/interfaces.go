package v1beta1

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

	// GetWidgetParameters returns the widget settings Crossplane manages
	// (spec.forProvider). The returned pointer refers to the resource's own
	// spec: changes made through it, such as late initialization, change
	// the resource.
	GetWidgetParameters() *WidgetParameters

	// GetWidgetInitParameters returns the settings used only to create the
	// widget (spec.initProvider). The returned pointer refers to the
	// resource's own spec.
	GetWidgetInitParameters() *WidgetInitParameters

	// GetWidgetObservation returns the widget as last observed. The returned
	// pointer refers to the resource's own status.
	GetWidgetObservation() *WidgetObservation

	// SetWidgetObservation replaces the observed state of the widget.
	SetWidgetObservation(o WidgetObservation)

	// GetDriftRepairs returns the record of the widget's drift repairs, or
	// nil when there was none.
	GetDriftRepairs() *DriftRepairs

	// SetDriftRepairs replaces the record of the widget's drift repairs.
	SetDriftRepairs(d *DriftRepairs)
}

// A WidgetKeyResource is a WidgetKey managed resource of either scope. The
// namespaced and the cluster-scoped WidgetKey kinds implement it, so a
// controller written against it serves both.
//
// +kubebuilder:object:generate=false
type WidgetKeyResource interface {
	resource.Managed

	// GetWidgetKeyInitParameters returns the settings used only to create
	// the key (spec.initProvider). The returned pointer refers to the
	// resource's own spec.
	GetWidgetKeyInitParameters() *WidgetKeyInitParameters

	// GetWidgetName returns the name of the widget the key belongs to, or ""
	// while the name is neither set nor resolved from a reference.
	GetWidgetName() string

	// GetKeyRotation returns how the key is rotated (spec.forProvider.rotation),
	// or nil when it is not. The returned pointer refers to the resource's
	// own spec.
	GetKeyRotation() *KeyRotation

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
