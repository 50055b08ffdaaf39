package v1beta1

import xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

// TypeUpToDate is the condition of a Widget imported with management policy
// Observe that says whether taking it over (policies that allow Update)
// would change the widget, and how: the review of an import before the
// takeover. Composition functions read its reason to review an adoption on
// behalf of a composite resource: the reasons are a stable contract.
const TypeUpToDate xpv2.ConditionType = "UpToDate"

// Reasons of the UpToDate condition.
const (
	// ReasonWouldChange: under full management the provider would change
	// the widget; the message lists each field.
	ReasonWouldChange xpv2.ConditionReason = "WouldChange"
	// ReasonNoDifference: the widget matches the spec.
	ReasonNoDifference xpv2.ConditionReason = "NoDifference"
	// ReasonManaged: the resource is no longer observe-only; the provider
	// applies the spec and repairs drift.
	ReasonManaged xpv2.ConditionReason = "Managed"
	// ReasonNotFound: no widget of the external name exists.
	ReasonNotFound xpv2.ConditionReason = "NotFound"
	// ReasonOutOfReach: a resource outside the namespace of this
	// namespaced Widget manages the widget. The message names neither.
	ReasonOutOfReach xpv2.ConditionReason = "OutOfReach"
	// ReasonManagedByAnother: another resource the Widget may see (one of
	// its namespace, or any resource for a cluster-scoped Widget) manages
	// the widget, so a takeover would be refused.
	ReasonManagedByAnother xpv2.ConditionReason = "ManagedByAnother"
	// ReasonReserved: no resource manages the widget, but a resource
	// outside the namespace of this namespaced Widget released it, and it
	// stays reserved for the releaser's namespace. The message names
	// neither.
	ReasonReserved xpv2.ConditionReason = "Reserved"
)
