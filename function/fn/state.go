package fn

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// A Flavour is the kind of XR the function composes: it decides the scope of
// the managed resources and how connection details reach the XR's owner.
type Flavour string

// Flavours of XR.
const (
	// FlavourUnknown is an XR the function could not read.
	FlavourUnknown Flavour = "Unknown"

	// FlavourNamespaced is a Crossplane v2 XR of scope Namespaced. It
	// composes namespaced managed resources (widget.m.widgetco.io) in its
	// own namespace, and a connection Secret next to them, because
	// Crossplane v2 does not publish connection details of such XRs.
	FlavourNamespaced Flavour = "Namespaced"

	// FlavourLegacy is an XR of scope LegacyCluster, usually created by a
	// claim. It composes cluster-scoped managed resources
	// (widget.widgetco.io), and returns the connection details as the XR's
	// own, which Crossplane writes to the XR's connection secret and copies
	// to the claim's.
	FlavourLegacy Flavour = "Legacy"
)

// An xwidget is the observed XR: its identity, flavour and spec.
type xwidget struct {
	flavour   Flavour
	kind      string
	name      string
	namespace string

	// claim is the namespace/name of the claim of a legacy XR, if any.
	claim     string
	claimKind string

	spec xwidgetSpec

	// conditions the XR has now, by type, to detect transitions.
	conditions map[string]condition
}

// String identifies the XR in messages: its kind and name, with the
// namespace for a namespaced XR.
func (x xwidget) String() string {
	switch {
	case x.name == "":
		return "the composite resource"
	case x.namespace != "":
		return fmt.Sprintf("%s %s/%s", x.kind, x.namespace, x.name)
	default:
		return fmt.Sprintf("%s %s", x.kind, x.name)
	}
}

// owner identifies who the app team knows the widget as: the claim of a
// legacy XR, otherwise the XR.
func (x xwidget) owner() string {
	if x.claim != "" {
		return x.claimKind + " " + x.claim
	}
	return x.String()
}

// xwidgetSpec is the spec of an XWidget, as an app team writes it. Fields an
// XR of either flavour carries for Crossplane are ignored.
type xwidgetSpec struct {
	Size        *string           `json:"size,omitempty"`
	Region      *string           `json:"region,omitempty"`
	Keys        *int64            `json:"keys,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Description *string           `json:"description,omitempty"`

	// OnDelete is what deleting the XR does to the widget (keep.go).
	OnDelete *string `json:"onDelete,omitempty"`

	// Adopt names an existing widget to adopt (adopt.go).
	Adopt *adoptSpec `json:"adopt,omitempty"`

	// Rotation is how the access keys rotate (rotation.go).
	Rotation *rotationSpec `json:"rotation,omitempty"`

	// WriteConnectionSecretToRef names the connection Secret of a
	// namespaced XWidget. A legacy XR has a field of the same name that
	// Crossplane manages; the function ignores it.
	WriteConnectionSecretToRef *localSecretReference `json:"writeConnectionSecretToRef,omitempty"`
}

type localSecretReference struct {
	Name string `json:"name"`
}

// A state is what the function reads from a request.
type state struct {
	input    *v1beta1.WidgetPolicy
	xr       xwidget
	observed observedResources
	widget   widgetObservation
	dxr      *resource.Composite
}

// readState reads the request. It returns a usable state, identifying the XR
// as far as it could be read, even when it returns an error. It stops early,
// with what it has read, once ctx is done; the caller must then not use the
// state.
func readState(ctx context.Context, req *fnv1.RunFunctionRequest) (*state, error) {
	s := &state{input: &v1beta1.WidgetPolicy{}, xr: xwidget{flavour: FlavourUnknown, kind: "XWidget"}}
	if err := ctx.Err(); err != nil {
		return s, err
	}

	if req.GetObserved().GetComposite().GetResource() == nil {
		return s, noComposite()
	}
	oxr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		return s, unreadable(err, "cannot read the observed composite resource")
	}
	s.xr, err = readXWidget(ctx, oxr)
	if err != nil {
		return s, err
	}

	if req.GetInput() != nil {
		if err := request.GetInput(req, s.input); err != nil {
			return s, invalidInput(err)
		}
	}

	s.observed = observedResources(req.GetObserved().GetResources())
	s.widget = observeWidget(ctx, s.observed)
	if s.dxr, err = request.GetDesiredCompositeResource(req); err != nil {
		return s, unreadable(err, "cannot read the desired composite resource of earlier pipeline steps")
	}
	return s, nil
}

// readXWidget identifies the XR's flavour and reads its spec. An XR whose
// identity no API server accepts is rejected before anything else is read:
// the function names and describes what it composes after the XR.
func readXWidget(ctx context.Context, oxr *resource.Composite) (xwidget, error) {
	xr := oxr.Resource
	if errs := validateIdentity(xr); len(errs) > 0 {
		return xwidget{flavour: FlavourUnknown, kind: "XWidget"}, invalidComposite(errs)
	}
	x := xwidget{
		flavour:    FlavourUnknown,
		kind:       xr.GetKind(),
		name:       xr.GetName(),
		namespace:  xr.GetNamespace(),
		conditions: observedConditions(ctx, xr),
	}
	if x.kind == "" {
		x.kind = "XWidget"
	}

	switch _, err := xr.GetValue("spec.crossplane"); {
	case x.namespace != "":
		x.flavour = FlavourNamespaced
	case err == nil:
		// A v2 XR of scope Cluster keeps Crossplane's fields under
		// spec.crossplane. Crossplane drops its connection details and it
		// has no claim, so neither of our flavours fits it.
		return x, unsupported(fmt.Sprintf("%s is a cluster-scoped (scope Cluster) composite resource; function-widget composes composite resources of scope Namespaced (apiextensions.crossplane.io/v2) and LegacyCluster (apiextensions.crossplane.io/v1, with claims): use one of those in the CompositeResourceDefinition", x))
	default:
		x.flavour = FlavourLegacy
		if ref := xr.GetClaimReference(); ref != nil && ref.Name != "" {
			if errs := validateClaimReference(ref); len(errs) > 0 {
				return x, invalidClaimReference(x, errs)
			}
			x.claim = ref.Namespace + "/" + ref.Name
			x.claimKind = ref.Kind
		}
	}

	if err := xr.GetValueInto("spec", &x.spec); err != nil && !fieldpath.IsNotFound(err) {
		return x, unreadable(err, "cannot read the spec of "+x.String())
	}
	return x, nil
}
