package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Condition reasons of namespace policies and quotas (docs/policy.md).
const (
	// reasonQuotaExceeded rejects an XWidget, or a change to one, that
	// would take its namespace over a quota.
	reasonQuotaExceeded = "QuotaExceeded"
	// reasonInvalidNamespacePolicy rejects a new XWidget, or reports on an
	// admitted one, while a namespace policy that may apply is invalid.
	reasonInvalidNamespacePolicy = "InvalidNamespacePolicy"
	// reasonAdmittedOverLimit reports an XWidget admitted before its
	// namespace's limits were lowered: it stays as it is.
	reasonAdmittedOverLimit = "AdmittedOverLimit"
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
func readTeam(req *fnv1.RunFunctionRequest, ns string, pol policy, queue *fnv1.ResourceSelector, settled func(namespaceLimits) bool) (team, *fnv1.Requirements, error) {
	t := team{limits: limitsFor(ns, pol, nil)}
	if ns == "" {
		return t, nil, nil
	}
	got, err := request.GetRequiredResources(req)
	if err != nil {
		return t, teamRequirements(ns, needs{}), unreadable(err, "cannot read the required resources Crossplane sent")
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

func ownOf(s *state) own {
	o := own{legacy: s.xr.flavour == FlavourLegacy}
	if s.widget.exists {
		o.widget = s.widget.name
	}
	for n, r := range s.observed {
		if !strings.HasPrefix(n, "key-") {
			continue
		}
		if name := r.GetResource().GetFields()["metadata"].GetStructValue().GetFields()["name"].GetStringValue(); name != "" {
			o.keys = append(o.keys, name)
		}
	}
	return o
}

func (o own) isWidget(c counted) bool {
	return o.widget != "" && c.legacy == o.legacy && c.name == o.widget
}
func (o own) isKey(c counted) bool { return c.legacy == o.legacy && slices.Contains(o.keys, c.name) }

// A verdict is the namespace's answer for an XR that its Composition's policy
// admits.
type verdict struct {
	limits namespaceLimits
	// kept are the limits an XR admitted earlier exceeds now; it stays as
	// it is.
	kept []string
	// provisional is whether the XR's place within its namespace's quotas
	// may still change: a call that counted the namespace's usage has not
	// yet seen its Widget Ready after its creation second
	// (settledInNamespace).
	provisional bool
	// pending, when set, is the condition of a new XR that fits its
	// namespace's quotas but waits until the XRs created in the same second
	// are counted: it composes nothing yet (admission.go).
	pending *condition
}

// admit checks the settings an XR asks for against its namespace's limits and
// quotas. An XR whose Widget exists was admitted earlier: it is never
// rejected for what it already has, only for a change that would exceed a
// limit (a bigger size, more keys); what it has beyond the current limits is
// returned as kept. A new XR is rejected for any limit it exceeds, and while
// a namespace policy that may apply is invalid; ahead are the new XRs of its
// namespace ordered before it, for which it leaves room (admission.go).
func admit(x xwidget, want settings, o own, t team, currentSize string, ahead []queued) (verdict, error) {
	l, u := t.limits, t.usage
	v := verdict{limits: l}
	admitted := o.widget != ""
	spec := field.NewPath("spec")
	var rules, quotas field.ErrorList

	if len(l.broken) > 0 {
		var msgs []string
		for _, p := range l.broken {
			msgs = append(msgs, fmt.Sprintf("%s is invalid: %s", p, join(p.errs)))
		}
		if !admitted {
			return v, &rejection{
				reason:  reasonInvalidNamespacePolicy,
				message: fmt.Sprintf("%s cannot be admitted: a namespace policy that may apply to %s is invalid, so no new XWidget is admitted there until the platform team fixes it. %s", x.owner(), l.namespace, strings.Join(msgs, "; ")),
			}
		}
		v.kept = append(v.kept, "no new XWidget is admitted in "+l.namespace+" until the platform team fixes it: "+strings.Join(msgs, "; "))
	}

	// Rules.
	switch {
	case l.sizes.allows(want.size):
	case admitted && want.size == currentSize:
		v.kept = append(v.kept, fmt.Sprintf("spec.size %s is no longer allowed by %s (allowed: %s)", want.size, l.sizes.decidedBy(), listOrNone(l.sizes.items)))
	default:
		rules = append(rules, field.Invalid(spec.Child("size"), want.size, fmt.Sprintf("%s only %s in %s", l.sizes.allow(), listOrNone(l.sizes.items), l.namespace)))
	}
	if !admitted && l.regions.restricted && !l.regions.allows(want.region) {
		if want.region == "" {
			rules = append(rules, field.Required(spec.Child("region"), fmt.Sprintf("%s only %s in %s: set one", l.regions.allow(), listOrNone(l.regions.items), l.namespace)))
		} else {
			rules = append(rules, field.Invalid(spec.Child("region"), want.region, fmt.Sprintf("%s only %s in %s", l.regions.allow(), listOrNone(l.regions.items), l.namespace)))
		}
	}
	if want.keys > l.maxKeys.max {
		if admitted && want.keys <= len(o.keys) {
			v.kept = append(v.kept, fmt.Sprintf("spec.keys %d is more than %s (%d)", want.keys, l.maxKeys.allow(), l.maxKeys.max))
		} else {
			rules = append(rules, field.Invalid(spec.Child("keys"), want.keys, fmt.Sprintf("%s 0 to %d access keys in %s", l.maxKeys.allow(), l.maxKeys.max, l.namespace)))
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
	if q := l.widgetsPerSize[want.size]; q != nil {
		others, rank := othersAndRank(u.widgets, o.isWidget, func(c counted) bool { return c.size == want.size })
		sized := slices.DeleteFunc(slices.Clone(ahead), func(e queued) bool { return e.size != want.size })
		switch {
		case (!admitted || currentSize != want.size) && len(others) >= q.max:
			quotas = append(quotas, field.Forbidden(spec.Child("size"), fmt.Sprintf("%s already has %d of %d %s widgets (quota set by %s): %s", l.namespace, len(others), q.max, want.size, q.decidedBy(), owners(others))))
		case !admitted && len(others)+len(sized) >= q.max:
			quotas = append(quotas, field.Forbidden(spec.Child("size"), fmt.Sprintf("%s has %d of %d %s widgets (quota set by %s)%s, and %d XWidgets or claims created earlier wait for the rest: %s", l.namespace, len(others), q.max, want.size, q.decidedBy(), ownersOrNothing(others), len(sized), names(sized))))
		case admitted && currentSize == want.size && rank >= q.max:
			v.kept = append(v.kept, fmt.Sprintf("%s has %d %s widgets, more than the quota of %d set by %s", l.namespace, len(others)+1, want.size, q.max, q.decidedBy()))
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
		if !admitted && reserved > 0 && len(others)+reserved+want.keys > q.max {
			quotas = append(quotas, field.Forbidden(spec.Child("keys"), fmt.Sprintf("%s has %d of %d access keys (quota set by %s), and XWidgets or claims created earlier wait for %d more: %s; this one asks for %d, at most %d fit", l.namespace, len(others), q.max, q.decidedBy(), reserved, names(ahead), want.keys, max(q.max-len(others)-reserved, 0))))
		} else if len(others)+want.keys > q.max {
			if want.keys > mine {
				quotas = append(quotas, field.Forbidden(spec.Child("keys"), fmt.Sprintf("%s already has %d of %d access keys in other widgets (quota set by %s); this one asks for %d, at most %d fit", l.namespace, len(others), q.max, q.decidedBy(), want.keys, max(q.max-len(others), 0))))
			} else {
				v.kept = append(v.kept, fmt.Sprintf("%s has %d access keys, more than the quota of %d set by %s", l.namespace, len(others)+mine, q.max, q.decidedBy()))
			}
		}
	}

	switch {
	case len(rules) > 0:
		return v, &rejection{
			reason:  reasonPolicyViolation,
			message: fmt.Sprintf("%s violates the widget policy of namespace %s; change these fields: %s", x.owner(), l.namespace, join(append(rules, quotas...))) + v.widenedNote(),
			fields:  append(rules, quotas...),
		}
	case len(quotas) > 0:
		return v, &rejection{
			reason:  reasonQuotaExceeded,
			message: fmt.Sprintf("%s exceeds a quota of namespace %s; nothing that exists was changed: %s", x.owner(), l.namespace, join(quotas)) + v.widenedNote(),
			fields:  quotas,
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

func (v verdict) widenedNote() string {
	if len(v.limits.widened) == 0 {
		return ""
	}
	return " Ignored, because a namespace policy can only narrow the Composition's: " + strings.Join(v.limits.widened, "; ") + "."
}

// condition is the PolicyCompliant condition of an XR the verdict admits.
func (v verdict) condition(x xwidget) condition {
	if len(v.kept) > 0 {
		reason := reasonAdmittedOverLimit
		if len(v.limits.broken) > 0 {
			reason = reasonInvalidNamespacePolicy
		}
		return condition{
			Type:    typePolicyCompliant,
			Status:  corev1.ConditionFalse,
			Reason:  reason,
			Message: clip(fmt.Sprintf("%s was admitted earlier and stays as it is, but it cannot grow: %s. Limits: %s.", x.owner(), strings.Join(v.kept, "; "), v.limits.summary()) + v.widenedNote()),
		}
	}
	msg := fmt.Sprintf("%s complies with the platform's widget policy: %s.", x.owner(), v.limits.summary())
	if v.provisional {
		msg += " Its place in the namespace's quotas is provisional until its widget is ready."
	}
	return condition{
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

// admitInNamespace applies the policies and quotas of the XR's namespace to
// an XR its Composition's policy admits, and asks for what it needs to. A
// verdict with pending set admits nothing yet: the function composes nothing
// and is called again (admission.go). now is the function's clock.
func admitInNamespace(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, s *state, pol policy, want settings, now time.Time) (verdict, error) {
	o := ownOf(s)
	current := s.widget.atProvider.Size
	if sz := widgetSpecSize(s); sz != "" {
		current = sz
	}
	settled := func(l namespaceLimits) bool { return settledInNamespace(s, want, o, l, current) }
	ns := teamNamespace(s.xr)
	var qs *fnv1.ResourceSelector
	if composedNothing(s) {
		qs = queueSelector(req, s.xr, ns)
	}
	t, reqs, err := readTeam(req, ns, pol, qs, settled)
	rsp.Requirements = reqs
	if err != nil {
		return verdict{limits: t.limits}, err
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
	v, err := admit(s.xr, want, o, t, current, ahead)
	if err == nil && t.queue.read && !completeView(me, later(t.queue.horizon, observedHorizon(req))) {
		c := pendingCondition(s.xr, ns, me, now)
		v.pending = &c
		return v, nil
	}
	// Only a call that counted the namespace's usage with the XR's Widget
	// Ready after its creation second may write the final condition that
	// settles the XR: an earlier Compliant one was decided before a racing
	// XWidget's Widget may have been counted.
	final := o.widget != "" && s.widget.isReady() && readyAfterCreationSecond(s)
	v.provisional = t.counted && t.limits.hasQuota() && !final
	return v, err
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
//     after its Widget became Ready writes it (verdict.provisional); one
//     that counted earlier writes a provisional one. A changed policy or
//     namespace label gives another condition, so the XR counts again.
//
// An XR reported over a limit (AdmittedOverLimit) is not settled: it counts
// at every change, and complies again once the namespace is within its
// quotas.
func settledInNamespace(s *state, want settings, o own, l namespaceLimits, currentSize string) bool {
	if o.widget == "" || want.size != currentSize || want.keys > len(o.keys) {
		return false
	}
	if !s.widget.isReady() || !readyAfterCreationSecond(s) {
		return false
	}
	observed, ok := s.xr.conditions[typePolicyCompliant]
	return ok && observed == (verdict{limits: l}).condition(s.xr)
}

// widgetSpecSize is the size the observed Widget asks for, as quotas count
// it.
func widgetSpecSize(s *state) string {
	ocd, ok := s.observed.get(resourceWidget)
	if !ok {
		return ""
	}
	sz, _ := ocd.Resource.GetString("spec.forProvider.size")
	return sz
}

// readyAfterCreationSecond reports whether the observed Widget's Ready
// condition became True in a later second than the Widget was created.
func readyAfterCreationSecond(s *state) bool {
	ocd, ok := s.observed.get(resourceWidget)
	if !ok {
		return false
	}
	created := ocd.Resource.GetCreationTimestamp()
	cs, _, _ := unstructured.NestedSlice(ocd.Resource.Object, "status", "conditions")
	for _, c := range cs {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" || m["status"] != "True" {
			continue
		}
		at, _ := m["lastTransitionTime"].(string)
		t, err := time.Parse(time.RFC3339, at)
		return err == nil && t.Unix() > created.Unix()
	}
	return false
}

// replaceCondition replaces the condition of the same type as c in cs.
func replaceCondition(cs []condition, c condition) []condition {
	for i := range cs {
		if cs[i].Type == c.Type {
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}
