// Package nspolicy admits an XR to its namespace: it applies the namespace
// policies a platform team writes in EnvironmentConfigs and the namespace's
// quotas to an XR its Composition's WidgetPolicy already admits, and queues
// new XRs for the quotas (docs/policy.md). A namespace policy can only narrow
// the Composition's; it decides whether the XR is composed, never what.
//
// The composition calls Admit once per call, and needs nothing else of this
// package but the types Admit takes and returns.
package nspolicy

import (
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// An XR is the XR to admit, as admission knows it.
type XR struct {
	// Owner is who the app team knows the XR as, for messages: its claim,
	// or the XR itself.
	Owner string
	// Kind is the XR's kind: the XRs of its namespace of the same kind
	// queue with it for the namespace's quotas (admission.go).
	Kind string
	// Legacy is whether the XR is of scope LegacyCluster; otherwise it is
	// namespaced.
	Legacy bool
	// Namespace is a namespaced XR's namespace.
	Namespace string
	// Claim is the namespace/name of a legacy XR's claim, if it has one.
	Claim string
	// PolicyCompliant is the XR's PolicyCompliant condition now, if it has
	// one.
	PolicyCompliant *Condition
}

// A Composition is the Composition's WidgetPolicy, with its defaults
// applied: the limits a namespace policy may narrow, and the defaults with
// which the namespace's other XRs are read.
type Composition struct {
	// AllowedSizes and AllowedRegions are empty when everything is
	// allowed.
	AllowedSizes   []string
	AllowedRegions []string
	MaxKeys        int

	DefaultSize string
	DefaultKeys int
}

// A Spec is what the XR asks for, with the Composition's defaults applied.
type Spec struct {
	Size   string
	Region string
	Keys   int
}

// Composed is what the XR has composed so far, as the function observes it.
type Composed struct {
	// Nothing is whether the XR has none of the resources the function
	// composes: it is new, and takes a place in its namespace's queue. An
	// XR that composed anything was admitted earlier; waiting would drop
	// what it has from the desired state, which Crossplane would delete.
	Nothing bool
	// Widget is the name of the XR's Widget; empty when it does not exist
	// yet. An XR whose Widget exists counts as admitted.
	Widget string
	// Keys are the names of the XR's WidgetKeys.
	Keys []string
	// Size is the size the Widget has: what its spec asks for, or else
	// what the provider reports.
	Size string
	// ReadySinceCreationSecond is whether the Widget is Ready, and its Ready
	// condition became True in a later second than the Widget was created.
	ReadySinceCreationSecond bool
}

// An Input is what Admit decides on.
type Input struct {
	XR          XR
	Composition Composition
	Want        Spec
	Composed    Composed
}

// A Condition of the XR and its claim.
type Condition struct {
	Type    string
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// A Rejection is why the namespace refuses an XR. It is a user-facing
// message: its reason and message become the PolicyCompliant condition of
// the XR and its claim, and the message the fatal result.
type Rejection struct {
	Reason  string
	Message string

	// Fields are the invalid fields, if the rejection is about fields.
	Fields field.ErrorList
}

func (r *Rejection) Error() string { return r.Message }

// A Verdict is the namespace's answer for an XR that its Composition's policy
// admits.
type Verdict struct {
	// Requirements are the resources the function requires of Crossplane to
	// decide: the namespace's policies, and what it has. They are set with
	// every verdict, and with an error.
	Requirements *fnv1.Requirements

	// Pending, when set, is the condition of a new XR that fits its
	// namespace's quotas but waits until the XRs created in the same second
	// are counted: it composes nothing yet (admission.go).
	Pending *Condition

	owner  string
	limits namespaceLimits
	// kept are the limits an XR admitted earlier exceeds now; it stays as
	// it is.
	kept []string
	// provisional is whether the XR's place within its namespace's quotas
	// may still change: a call that counted the namespace's usage has not
	// yet seen its Widget Ready after its creation second
	// (settledInNamespace).
	provisional bool
}

// Admit applies the policies and quotas of the XR's namespace to an XR its
// Composition's policy admits, and says what the function must require of
// Crossplane to decide. An XR the namespace refuses is returned as a
// *Rejection. A verdict with Pending set admits nothing yet: the function
// composes nothing and is called again (admission.go). now is the function's
// clock. Admit does not modify req.
func Admit(req *fnv1.RunFunctionRequest, in Input, now time.Time) (Verdict, error) {
	x, want, c := in.XR, in.Want, in.Composed
	o := own{legacy: x.Legacy, widget: c.Widget, keys: c.Keys}
	current := c.Size
	settled := func(l namespaceLimits) bool { return settledInNamespace(x, want, c, o, l, current) }
	ns := teamNamespace(x)
	var qs *fnv1.ResourceSelector
	if c.Nothing {
		qs = queueSelector(req, x, ns)
	}
	t, reqs, err := readTeam(req, ns, in.Composition, qs, settled)
	if err != nil {
		return Verdict{Requirements: reqs, owner: x.Owner, limits: t.limits}, err
	}
	me := self(req, want)
	var ahead []queued
	if t.queue.read {
		ahead = t.queue.ahead(me, t.usage.widgets, o.legacy, t.limits)
	}
	for _, c := range t.usage.widgets {
		if o.isWidget(c) && c.size != "" {
			current = c.size
		}
	}
	v, err := admit(x, want, o, t, current, ahead)
	v.Requirements = reqs
	if err == nil && t.queue.read && !completeView(me, later(t.queue.horizon, observedHorizon(req))) {
		p := pendingCondition(x, ns, me, now)
		v.Pending = &p
		return v, nil
	}
	// Only a call that counted the namespace's usage with the XR's Widget
	// Ready after its creation second may write the final condition that
	// settles the XR: an earlier Compliant one was decided before a racing
	// XWidget's Widget may have been counted.
	final := o.widget != "" && c.ReadySinceCreationSecond
	v.provisional = t.counted && t.limits.hasQuota() && !final
	return v, err
}
