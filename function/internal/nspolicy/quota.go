package nspolicy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// Condition reasons of namespace policies and quotas (docs/policy.md).
const (
	// ReasonQuotaExceeded rejects an XWidget, or a change to one, that
	// would take its namespace over a quota.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonInvalidNamespacePolicy rejects a new XWidget, or reports on an
	// admitted one, while a namespace policy that may apply is invalid.
	ReasonInvalidNamespacePolicy = "InvalidNamespacePolicy"
	// ReasonAdmittedOverLimit reports an XWidget admitted before its
	// namespace's limits were lowered: it stays as it is.
	ReasonAdmittedOverLimit = "AdmittedOverLimit"
)

// The condition type and reasons admission shares with the rest of the
// function, which reports them too (function/fn/conditions.go).
const (
	typePolicyCompliant   = "PolicyCompliant"
	reasonCompliant       = "Compliant"
	reasonPolicyViolation = "PolicyViolation"
	reasonInvalidRequest  = "InvalidRequest"
)

// A counted is one Widget or WidgetKey that counts towards a namespace's
// quotas.
type counted struct {
	legacy bool
	name   string
	owner  string
	// composite is the XR that composed it (label crossplane.io/composite).
	composite string
	size      string
	created   metav1.Time
}

// usage is what a namespace has: its Widgets and WidgetKeys, namespaced and
// those of its claims, oldest first.
type usage struct {
	widgets []counted
	keys    []counted
}

// A team is what the function read about the namespace of an XR.
type team struct {
	limits namespaceLimits
	usage  usage
	// counted is whether usage holds the namespace's usage as Crossplane
	// fetched it for this call.
	counted bool
	// queue is the namespace's XRs of the XR's kind, read for a new XR
	// (admission.go).
	queue queue
}

// readTeam reads the namespace, its policies and usage from the request's
// required resources, and returns what the function requires. Until
// Crossplane has fetched all of that the function decides on the
// Composition's policy alone, and Crossplane calls it again with them.
// Where a quota applies it requires the namespace's Widgets, its WidgetKeys
// only where a key quota applies, and, with queue non-nil (a new XR), the
// XRs queue selects (admission.go).
//
// settled reports, given the namespace's limits, whether the XR no longer
// needs the namespace's usage (settledInNamespace). The usage is then neither
// read nor required, nor is it where no quota applies to the namespace: core
// stops reconciling the XR at every change to another Widget or WidgetKey of
// its namespace, which would otherwise make each change cost a reconcile of
// every XR there (docs/benchmarks.md#namespace-policy-cost). Without that, one
// team's quota made every converging XR of every other namespace count its
// namespace, and core's per-XR circuit breakers opened.
func readTeam(req *fnv1.RunFunctionRequest, ns string, pol Composition, queue *fnv1.ResourceSelector, settled func(namespaceLimits) bool) (team, *fnv1.Requirements, error) {
	t := team{limits: limitsFor(ns, pol, nil)}
	if ns == "" {
		return t, nil, nil
	}
	got, err := request.GetRequiredResources(req)
	if err != nil {
		return t, teamRequirements(ns, needs{}), &Rejection{Reason: reasonInvalidRequest, Message: "cannot read the required resources Crossplane sent: " + text.Truncate(err.Error())}
	}
	ecs, ok := got[reqPolicies]
	if !ok {
		return t, teamRequirements(ns, needs{}), nil
	}
	if len(ecs) == 0 {
		return t, teamRequirements(ns, needs{}), nil
	}
	n, ok := got[reqNamespace]
	if !ok {
		// Whether the XR needs the usage depends on the namespace's
		// limits: ask for what a widget and a key quota need at once, to
		// save a call where both apply.
		return t, teamRequirements(ns, needs{namespace: true, widgets: true, keys: true, queue: queue}), nil
	}

	var nsLabels map[string]string
	if len(n) > 0 {
		nsLabels = n[0].Resource.GetLabels()
	}
	var policies []namespacePolicy
	for i := range ecs {
		if p, ok := parseNamespacePolicy(&ecs[i], nsLabels); ok {
			policies = append(policies, p)
		}
	}
	slices.SortFunc(policies, func(a, b namespacePolicy) int { return cmp.Compare(a.name, b.name) })
	limits := limitsFor(ns, pol, policies)
	if !limits.hasQuota() || settled(limits) {
		return team{limits: limits}, teamRequirements(ns, needs{namespace: true}), nil
	}

	keys := limits.keys.max >= 0
	reqs := teamRequirements(ns, needs{namespace: true, widgets: true, keys: keys, queue: queue})
	for k := range reqs.GetResources() {
		if _, ok := got[k]; !ok {
			return t, reqs, nil
		}
	}
	t.limits = limits
	t.counted = true
	t.usage.widgets = append(countOf(got[reqWidgets], false), countOf(got[reqLegacyWidgets], true)...)
	if keys {
		t.usage.keys = append(countOf(got[reqKeys], false), countOf(got[reqLegacyKeys], true)...)
	}
	sortCounted(t.usage.widgets)
	sortCounted(t.usage.keys)
	if queue != nil {
		t.queue = readQueue(got[reqQueue], pol)
	}
	return t, reqs, nil
}

func countOf(rs []resource.Required, legacy bool) []counted {
	out := make([]counted, 0, len(rs))
	for _, r := range rs {
		u := r.Resource
		c := counted{legacy: legacy, name: u.GetName(), composite: u.GetLabels()[labelComposite], created: u.GetCreationTimestamp()}
		c.owner = u.GetLabels()[labelClaimName]
		if c.owner == "" {
			c.owner = u.GetLabels()[labelComposite]
		}
		if c.owner == "" {
			c.owner = c.name
		}
		c.size, _, _ = unstructured.NestedString(u.Object, "spec", "forProvider", "size")
		out = append(out, c)
	}
	return out
}

// sortCounted orders by age, then name: the order in which a namespace's
// widgets are taken to have been admitted.
func sortCounted(cs []counted) {
	slices.SortStableFunc(cs, func(a, b counted) int {
		if c := a.created.Compare(b.created.Time); c != 0 {
			return c
		}
		if c := cmp.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(fmt.Sprint(a.legacy), fmt.Sprint(b.legacy))
	})
}

// own is what of the namespace's usage belongs to the XR: its Widget, if it
// exists (then the XR counts as admitted), and its WidgetKeys.
type own struct {
	legacy bool
	widget string // Empty when the Widget does not exist yet.
	keys   []string
}

func (o own) isWidget(c counted) bool {
	return o.widget != "" && c.legacy == o.legacy && c.name == o.widget
}
func (o own) isKey(c counted) bool { return c.legacy == o.legacy && slices.Contains(o.keys, c.name) }

// admit checks the settings an XR asks for against its namespace's limits and
// quotas. An XR whose Widget exists was admitted earlier: it is never
// rejected for what it already has, only for a change that would exceed a
// limit (a bigger size, more keys); what it has beyond the current limits is
// returned as kept. A new XR is rejected for any limit it exceeds, and while
// a namespace policy that may apply is invalid; ahead are the new XRs of its
// namespace ordered before it, for which it leaves room (admission.go).
//
//nolint:gocognit // A flat list of independent checks (rules, then quotas), each telling a new XR from an admitted one; the score is their count, not their nesting.
func admit(x XR, want Spec, o own, t team, currentSize string, ahead []queued) (Verdict, error) {
	l, u := t.limits, t.usage
	v := Verdict{owner: x.Owner, limits: l}
	admitted := o.widget != ""
	spec := field.NewPath("spec")
	var rules, quotas field.ErrorList

	if len(l.broken) > 0 {
		var msgs []string
		for _, p := range l.broken {
			msgs = append(msgs, fmt.Sprintf("%s is invalid: %s", p, text.Join(p.errs)))
		}
		if !admitted {
			return v, &Rejection{
				Reason:  ReasonInvalidNamespacePolicy,
				Message: fmt.Sprintf("%s cannot be admitted: a namespace policy that may apply to %s is invalid, so no new XWidget is admitted there until the platform team fixes it. %s", x.Owner, l.namespace, strings.Join(msgs, "; ")),
			}
		}
		v.kept = append(v.kept, "no new XWidget is admitted in "+l.namespace+" until the platform team fixes it: "+strings.Join(msgs, "; "))
	}

	// Rules.
	switch {
	case l.sizes.allows(want.Size):
	case admitted && want.Size == currentSize:
		v.kept = append(v.kept, fmt.Sprintf("spec.size %s is no longer allowed by %s (allowed: %s)", want.Size, l.sizes.decidedBy(), listOrNone(l.sizes.items)))
	default:
		rules = append(rules, field.Invalid(spec.Child("size"), want.Size, fmt.Sprintf("%s only %s in %s", l.sizes.allow(), listOrNone(l.sizes.items), l.namespace)))
	}
	if !admitted && l.regions.restricted && !l.regions.allows(want.Region) {
		if want.Region == "" {
			rules = append(rules, field.Required(spec.Child("region"), fmt.Sprintf("%s only %s in %s: set one", l.regions.allow(), listOrNone(l.regions.items), l.namespace)))
		} else {
			rules = append(rules, field.Invalid(spec.Child("region"), want.Region, fmt.Sprintf("%s only %s in %s", l.regions.allow(), listOrNone(l.regions.items), l.namespace)))
		}
	}
	if want.Keys > l.maxKeys.max {
		if admitted && want.Keys <= len(o.keys) {
			v.kept = append(v.kept, fmt.Sprintf("spec.keys %d is more than %s (%d)", want.Keys, l.maxKeys.allow(), l.maxKeys.max))
		} else {
			rules = append(rules, field.Invalid(spec.Child("keys"), want.Keys, fmt.Sprintf("%s 0 to %d access keys in %s", l.maxKeys.allow(), l.maxKeys.max, l.namespace)))
		}
	}

	// Quotas.
	if q := l.widgets; q.max >= 0 {
		others, rank := othersAndRank(u.widgets, o.isWidget, func(counted) bool { return true })
		switch {
		case !admitted && len(others) >= q.max:
			quotas = append(quotas, field.Forbidden(spec, fmt.Sprintf("%s already has %d of %d widgets (quota set by %s): %s", l.namespace, len(others), q.max, q.decidedBy(), owners(others))))
		case !admitted && len(others)+len(ahead) >= q.max:
			quotas = append(quotas, field.Forbidden(spec, fmt.Sprintf("%s has %d of %d widgets (quota set by %s)%s, and %d XWidgets or claims created earlier wait for the rest: %s", l.namespace, len(others), q.max, q.decidedBy(), ownersOrNothing(others), len(ahead), names(ahead))))
		case admitted && rank >= q.max:
			v.kept = append(v.kept, fmt.Sprintf("%s has %d widgets, more than the quota of %d set by %s", l.namespace, len(others)+1, q.max, q.decidedBy()))
		}
	}
	if q := l.widgetsPerSize[want.Size]; q != nil {
		others, rank := othersAndRank(u.widgets, o.isWidget, func(c counted) bool { return c.size == want.Size })
		sized := slices.DeleteFunc(slices.Clone(ahead), func(e queued) bool { return e.size != want.Size })
		switch {
		case (!admitted || currentSize != want.Size) && len(others) >= q.max:
			quotas = append(quotas, field.Forbidden(spec.Child("size"), fmt.Sprintf("%s already has %d of %d %s widgets (quota set by %s): %s", l.namespace, len(others), q.max, want.Size, q.decidedBy(), owners(others))))
		case !admitted && len(others)+len(sized) >= q.max:
			quotas = append(quotas, field.Forbidden(spec.Child("size"), fmt.Sprintf("%s has %d of %d %s widgets (quota set by %s)%s, and %d XWidgets or claims created earlier wait for the rest: %s", l.namespace, len(others), q.max, want.Size, q.decidedBy(), ownersOrNothing(others), len(sized), names(sized))))
		case admitted && currentSize == want.Size && rank >= q.max:
			v.kept = append(v.kept, fmt.Sprintf("%s has %d %s widgets, more than the quota of %d set by %s", l.namespace, len(others)+1, want.Size, q.max, q.decidedBy()))
		}
	}
	if q := l.keys; q.max >= 0 {
		others, _ := othersAndRank(u.keys, o.isKey, func(counted) bool { return true })
		// What the XR has: its keys in the list, or, should the list miss
		// them, the ones it observes.
		mine := max(len(u.keys)-len(others), len(o.keys))
		reserved := 0
		for _, e := range ahead {
			reserved += e.keys
		}
		if !admitted && reserved > 0 && len(others)+reserved+want.Keys > q.max {
			quotas = append(quotas, field.Forbidden(spec.Child("keys"), fmt.Sprintf("%s has %d of %d access keys (quota set by %s), and XWidgets or claims created earlier wait for %d more: %s; this one asks for %d, at most %d fit", l.namespace, len(others), q.max, q.decidedBy(), reserved, names(ahead), want.Keys, max(q.max-len(others)-reserved, 0))))
		} else if len(others)+want.Keys > q.max {
			if want.Keys > mine {
				quotas = append(quotas, field.Forbidden(spec.Child("keys"), fmt.Sprintf("%s already has %d of %d access keys in other widgets (quota set by %s); this one asks for %d, at most %d fit", l.namespace, len(others), q.max, q.decidedBy(), want.Keys, max(q.max-len(others), 0))))
			} else {
				v.kept = append(v.kept, fmt.Sprintf("%s has %d access keys, more than the quota of %d set by %s", l.namespace, len(others)+mine, q.max, q.decidedBy()))
			}
		}
	}

	switch {
	case len(rules) > 0:
		return v, &Rejection{
			Reason:  reasonPolicyViolation,
			Message: fmt.Sprintf("%s violates the widget policy of namespace %s; change these fields: %s", x.Owner, l.namespace, text.Join(append(rules, quotas...))) + v.widenedNote(),
			Fields:  append(rules, quotas...),
		}
	case len(quotas) > 0:
		return v, &Rejection{
			Reason:  ReasonQuotaExceeded,
			Message: fmt.Sprintf("%s exceeds a quota of namespace %s; nothing that exists was changed: %s", x.Owner, l.namespace, text.Join(quotas)) + v.widenedNote(),
			Fields:  quotas,
		}
	}
	return v, nil
}

// othersAndRank returns the items that match and are not the XR's own, and
// the position of the XR's own among those that match (or the count of
// others when it has none).
func othersAndRank(cs []counted, isOwn, match func(counted) bool) ([]counted, int) {
	others := make([]counted, 0, len(cs))
	rank := -1
	for _, c := range cs {
		if !match(c) {
			continue
		}
		if isOwn(c) {
			if rank < 0 {
				rank = len(others)
			}
			continue
		}
		others = append(others, c)
	}
	if rank < 0 {
		rank = len(others)
	}
	return others, rank
}

// ownersOrNothing is ": " and the owners of cs, or nothing when cs is empty.
func ownersOrNothing(cs []counted) string {
	if len(cs) == 0 {
		return ""
	}
	return ": " + owners(cs)
}

// maxOwnersShown bounds the names a quota message lists.
const maxOwnersShown = 10

// owners names the XWidgets and claims that own the counted widgets.
func owners(cs []counted) string {
	if len(cs) == 0 {
		return "none"
	}
	names := make([]string, 0, min(len(cs), maxOwnersShown))
	for _, c := range cs[:min(len(cs), maxOwnersShown)] {
		names = append(names, c.owner)
	}
	s := strings.Join(names, ", ")
	if n := len(cs) - maxOwnersShown; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

func (v Verdict) widenedNote() string {
	if len(v.limits.widened) == 0 {
		return ""
	}
	return " Ignored, because a namespace policy can only narrow the Composition's: " + strings.Join(v.limits.widened, "; ") + "."
}

// Condition is the PolicyCompliant condition of an XR the verdict admits.
func (v Verdict) Condition() Condition {
	if len(v.kept) > 0 {
		reason := ReasonAdmittedOverLimit
		if len(v.limits.broken) > 0 {
			reason = ReasonInvalidNamespacePolicy
		}
		return Condition{
			Type:    typePolicyCompliant,
			Status:  corev1.ConditionFalse,
			Reason:  reason,
			Message: clip(fmt.Sprintf("%s was admitted earlier and stays as it is, but it cannot grow: %s. Limits: %s.", v.owner, strings.Join(v.kept, "; "), v.limits.summary()) + v.widenedNote()),
		}
	}
	msg := fmt.Sprintf("%s complies with the platform's widget policy: %s.", v.owner, v.limits.summary())
	if v.provisional {
		msg += " Its place in the namespace's quotas is provisional until its widget is ready."
	}
	return Condition{
		Type:    typePolicyCompliant,
		Status:  corev1.ConditionTrue,
		Reason:  reasonCompliant,
		Message: clip(msg + v.widenedNote()),
	}
}

// maxPolicyMessage bounds the PolicyCompliant message of an admitted XR:
// every part is bounded, this bounds their sum.
const maxPolicyMessage = 2048

func clip(s string) string {
	if len(s) <= maxPolicyMessage {
		return s
	}
	cut := maxPolicyMessage - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// settledInNamespace reports whether an XR no longer needs its namespace's
// usage to be decided: nothing the namespace's other widgets and keys do can
// change its verdict until its limits or its own spec change. That is an XR
//
//   - that was admitted (its Widget exists) and does not grow: the same size,
//     no more keys than it has;
//   - whose Widget became Ready in a later second than it was created: every
//     widget that could be ordered before it (docs/policy.md#the-quota-race:
//     by creation time, then name) was created before that, so the call that
//     saw it Ready counted them all;
//   - whose PolicyCompliant condition is already the final Compliant one
//     these limits give. Only a call that counted the namespace's usage
//     after its Widget became Ready writes it (Verdict.provisional); one
//     that counted earlier writes a provisional one. A changed policy or
//     namespace label gives another condition, so the XR counts again.
//
// An XR reported over a limit (AdmittedOverLimit) is not settled: it counts
// at every change, and complies again once the namespace is within its
// quotas.
func settledInNamespace(x XR, want Spec, c Composed, o own, l namespaceLimits, currentSize string) bool {
	if o.widget == "" || want.Size != currentSize || want.Keys > len(o.keys) {
		return false
	}
	if !c.ReadySinceCreationSecond {
		return false
	}
	return x.PolicyCompliant != nil && *x.PolicyCompliant == (Verdict{owner: x.Owner, limits: l}).Condition()
}
