package nspolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// Namespace policies (docs/policy.md). A platform team narrows the
// Composition's WidgetPolicy for the namespaces it selects with a
// cluster-scoped EnvironmentConfig that carries the label
// fn.widgetco.io/widget-policy: "true" and a widgetPolicy under its data.
//
// The function asks Crossplane for every such EnvironmentConfig and does the
// namespace selection itself, rather than asking for the EnvironmentConfigs
// that carry the namespace's labels: that way what it asks for depends only on
// the XR's own namespace and on whether any policy exists, never on the
// namespace's labels or the policies' content (only on whether the XR still
// needs its namespace's usage: settledInNamespace), so its requirements
// settle after at most four calls per reconcile (teamRequirements).
const (
	// labelWidgetPolicy marks an EnvironmentConfig as a namespace policy.
	labelWidgetPolicy = "fn.widgetco.io/widget-policy"
	// policyDataKey is where a namespace policy lives in the
	// EnvironmentConfig's data.
	policyDataKey = "widgetPolicy"

	// labelClaimNamespace is the label Crossplane sets on the composed
	// resources of a claim's XR: the claim's namespace.
	labelClaimNamespace = "crossplane.io/claim-namespace"
	labelClaimName      = "crossplane.io/claim-name"
	labelComposite      = "crossplane.io/composite"

	// labelComponent marks the Widgets the function composes
	// (function/fn/compose.go): those count towards a namespace's
	// quotas.
	labelComponent  = "fn.widgetco.io/component"
	componentWidget = "widget"
)

// Names of the function's required resources.
const (
	reqNamespace     = "widget-policy-namespace"
	reqPolicies      = "widget-policy-environmentconfigs"
	reqWidgets       = "widget-quota-widgets"
	reqLegacyWidgets = "widget-quota-legacy-widgets"
	reqKeys          = "widget-quota-keys"
	reqLegacyKeys    = "widget-quota-legacy-keys"
	reqQueue         = "widget-quota-xwidgets"
)

// environmentConfigAPIVersion is Crossplane v2's EnvironmentConfig.
const environmentConfigAPIVersion = "apiextensions.crossplane.io/v1beta1"

// teamNamespace is the namespace whose policy and quotas apply to x: a
// namespaced XR's own, or a legacy XR's claim's. A legacy XR without a claim
// has none: only the Composition's policy applies to it.
func teamNamespace(x XR) string {
	if x.Namespace != "" {
		return x.Namespace
	}
	if ns, _, ok := strings.Cut(x.Claim, "/"); ok {
		return ns
	}
	return ""
}

// needs is what the function requires of an XR's namespace besides its
// policies.
type needs struct {
	// namespace is the Namespace, for its labels: once a policy exists.
	namespace bool
	// widgets are the namespace's Widgets of both scopes: where a quota
	// applies.
	widgets bool
	// keys are the namespace's WidgetKeys of both scopes: where a key quota
	// applies. They are most of what a namespace has (up to 10 per widget),
	// so they are asked for only then.
	keys bool
	// queue selects the namespace's XRs of the XR's own kind: for a new XR
	// where a quota applies (admission.go).
	queue *fnv1.ResourceSelector
}

// teamRequirements are the resources the function needs to apply the
// policies and quotas of namespace ns. It asks for the namespace policies
// first; only once one exists does it ask for the Namespace (for its labels)
// and, where a quota applies, what the namespace has. A cluster without
// namespace policies so costs one list of EnvironmentConfigs per reconcile
// and needs no permission Crossplane does not have (the Helm chart's
// ClusterRole does not let core read Namespaces: docs/policy.md). Given the
// same EnvironmentConfigs, Namespace and XR the requirements are the same on
// every call, so Crossplane calls the function at most four times per
// reconcile, and once when it seeds what the last reconcile required.
func teamRequirements(ns string, n needs) *fnv1.Requirements {
	if ns == "" {
		return nil
	}
	sel := func(apiVersion, kind, namespace string, match map[string]string) *fnv1.ResourceSelector {
		s := &fnv1.ResourceSelector{ApiVersion: apiVersion, Kind: kind}
		if namespace != "" {
			s.Namespace = &namespace
		}
		if match != nil {
			s.Match = &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: match}}
		}
		return s
	}
	r := &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		reqPolicies: sel(environmentConfigAPIVersion, "EnvironmentConfig", "", map[string]string{labelWidgetPolicy: "true"}),
	}}
	if !n.namespace {
		return r
	}
	r.Resources[reqNamespace] = &fnv1.ResourceSelector{ApiVersion: "v1", Kind: "Namespace", Match: &fnv1.ResourceSelector_MatchName{MatchName: ns}}
	nsv := namespacedv1beta1.SchemeGroupVersion.String()
	clv := clusterv1beta1.SchemeGroupVersion.String()
	// The namespace's own Widgets and WidgetKeys, and the cluster-scoped
	// ones of its claims: a team cannot dodge a quota with a WidgetClaim.
	if n.widgets {
		r.Resources[reqWidgets] = sel(nsv, namespacedv1beta1.WidgetKind, ns, map[string]string{labelComponent: componentWidget})
		r.Resources[reqLegacyWidgets] = sel(clv, clusterv1beta1.WidgetKind, "", map[string]string{labelComponent: componentWidget, labelClaimNamespace: ns})
	}
	if n.keys {
		r.Resources[reqKeys] = sel(nsv, namespacedv1beta1.WidgetKeyKind, ns, nil)
		r.Resources[reqLegacyKeys] = sel(clv, clusterv1beta1.WidgetKeyKind, "", map[string]string{labelClaimNamespace: ns})
	}
	if n.queue != nil {
		r.Resources[reqQueue] = n.queue
	}
	return r
}

// A namespacePolicySpec is what an EnvironmentConfig holds under
// data.widgetPolicy. Every limit is optional; a limit that is not set leaves
// the Composition's (or another namespace policy's) in place.
type namespacePolicySpec struct {
	// NamespaceSelector selects the namespaces the policy applies to. It is
	// required; {} selects every namespace.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`

	Rules  namespaceRules  `json:"rules,omitempty"`
	Quotas namespaceQuotas `json:"quotas,omitempty"`
}

// namespaceRules narrow the Composition's rules. An empty list narrows
// nothing, as in the WidgetPolicy.
type namespaceRules struct {
	AllowedSizes   []string `json:"allowedSizes,omitempty"`
	AllowedRegions []string `json:"allowedRegions,omitempty"`
	MaxKeys        *int64   `json:"maxKeys,omitempty"`
}

// namespaceQuotas are per namespace: what every XWidget and WidgetClaim of the
// namespace has together.
type namespaceQuotas struct {
	Widgets        *int64           `json:"widgets,omitempty"`
	WidgetsPerSize map[string]int64 `json:"widgetsPerSize,omitempty"`
	Keys           *int64           `json:"keys,omitempty"`
}

// maxQuota bounds every quota, so that counts and messages stay small.
const maxQuota = 10000

// A namespacePolicy is one EnvironmentConfig that applies to the namespace.
type namespacePolicy struct {
	name string
	spec namespacePolicySpec
	// errs are what is wrong with it; a policy with errors is not applied.
	errs field.ErrorList
}

// String names the policy object in messages.
func (p namespacePolicy) String() string { return "EnvironmentConfig " + p.name }

// parseNamespacePolicy reads the namespace policy of an EnvironmentConfig,
// and reports whether it applies to a namespace with the supplied labels. A
// policy with errors applies where its namespace selector, read on its own,
// selects; one whose selector cannot be read may be meant for any namespace,
// so it applies to every one.
func parseNamespacePolicy(ec *resource.Required, nsLabels map[string]string) (namespacePolicy, bool) {
	p := namespacePolicy{name: ec.Resource.GetName()}
	root := field.NewPath("data", policyDataKey)
	data, _ := ec.Resource.Object["data"].(map[string]any)
	v, ok := data[policyDataKey]
	if !ok {
		p.errs = field.ErrorList{field.Required(root, "an EnvironmentConfig labelled "+labelWidgetPolicy+"=true must hold a namespace policy here")}
		return p, true
	}
	p.errs = decodeNamespacePolicy(v, &p.spec, root)
	if len(p.errs) == 0 {
		p.errs = validateNamespacePolicy(p.spec, root)
	}
	sel, ok := selectorOf(v)
	if !ok {
		return p, true
	}
	return p, sel.Matches(labels.Set(nsLabels))
}

// decodeNamespacePolicy decodes v, the value of data.widgetPolicy, into s. It
// returns the fields it does not know and values of the wrong type.
func decodeNamespacePolicy(v any, s *namespacePolicySpec, root *field.Path) field.ErrorList {
	raw, err := json.Marshal(v)
	if err != nil {
		return field.ErrorList{field.Invalid(root, field.OmitValueType{}, err.Error())}
	}
	if errs := unknownFields(v, reflect.TypeFor[namespacePolicySpec](), root); len(errs) > 0 {
		return errs
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return field.ErrorList{decodeError(root, err)}
	}
	return nil
}

// selectorOf reads the namespace selector of v, the value of
// data.widgetPolicy, on its own: a policy whose other fields are wrong still
// says which namespaces it is meant for.
func selectorOf(v any) (labels.Selector, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(m["namespaceSelector"])
	if err != nil {
		return nil, false
	}
	ls := &metav1.LabelSelector{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if m["namespaceSelector"] == nil || dec.Decode(ls) != nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, false
	}
	return sel, true
}

// unknownFields returns the fields of v, a decoded JSON value, that type t
// does not have, with their paths: a misspelt limit would otherwise be
// silently unset. It descends into the structs of this file only; their
// other fields (such as the label selector) are checked when decoded.
func unknownFields(v any, t reflect.Type, p *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	m, ok := v.(map[string]any)
	if !ok || t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[namespacePolicySpec]().PkgPath() {
		return nil
	}
	known := map[string]reflect.Type{}
	names := []string{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		known[name] = f.Type
		names = append(names, name)
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(m) {
		ft, ok := known[k]
		if !ok {
			errs = append(errs, field.Forbidden(p.Child(text.Shown(k)), "unknown field; the known fields are "+strings.Join(names, ", ")))
			continue
		}
		errs = append(errs, unknownFields(m[k], ft, p.Child(k))...)
	}
	return errs
}

// decodeError says which field of a policy has a value of the wrong type, in
// the words of the policy's schema rather than Go's.
func decodeError(root *field.Path, err error) *field.Error {
	te := &json.UnmarshalTypeError{}
	if !errors.As(err, &te) || te.Field == "" {
		return field.Invalid(root, field.OmitValueType{}, strings.TrimPrefix(text.Truncate(err.Error()), "json: "))
	}
	p := root
	for _, f := range strings.Split(te.Field, ".") {
		p = p.Child(f)
	}
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Int64:
		want = "an integer"
	case reflect.Slice:
		want = "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		want = "an object"
	default: // the kind's name reads fine: "a string", "a bool"
	}
	return field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("must be %s, not %s", want, te.Value))
}

// validateNamespacePolicy returns every invalid field of a namespace policy.
func validateNamespacePolicy(s namespacePolicySpec, root *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.NamespaceSelector == nil {
		errs = append(errs, field.Required(root.Child("namespaceSelector"), "select the namespaces the policy applies to, such as {matchLabels: {widgetco.io/team: team-a}}; {} selects every namespace"))
	} else if _, err := metav1.LabelSelectorAsSelector(s.NamespaceSelector); err != nil {
		errs = append(errs, field.Invalid(root.Child("namespaceSelector"), field.OmitValueType{}, text.Truncate(err.Error())))
	}

	r := root.Child("rules")
	if n := len(s.Rules.AllowedSizes); n > len(v1beta1.Sizes) {
		errs = append(errs, field.TooMany(r.Child("allowedSizes"), n, len(v1beta1.Sizes)))
	} else {
		for i, sz := range s.Rules.AllowedSizes {
			if !slices.Contains(v1beta1.Sizes, v1beta1.Size(sz)) {
				errs = append(errs, field.NotSupported(r.Child("allowedSizes").Index(i), text.Shown(sz), v1beta1.Sizes))
			}
		}
	}
	if n := len(s.Rules.AllowedRegions); n > v1beta1.MaxAllowedRegions {
		errs = append(errs, field.TooMany(r.Child("allowedRegions"), n, v1beta1.MaxAllowedRegions))
	} else {
		for i, rg := range s.Rules.AllowedRegions {
			errs = append(errs, text.ValidateRegion(rg, r.Child("allowedRegions").Index(i))...)
		}
	}
	if m := s.Rules.MaxKeys; m != nil && (*m < 0 || *m > int64(v1beta1.MaxKeys)) {
		errs = append(errs, field.Invalid(r.Child("maxKeys"), *m, fmt.Sprintf("must be between 0 and %d", v1beta1.MaxKeys)))
	}

	q := root.Child("quotas")
	errs = append(errs, validateQuota(s.Quotas.Widgets, q.Child("widgets"))...)
	errs = append(errs, validateQuota(s.Quotas.Keys, q.Child("keys"))...)
	if n := len(s.Quotas.WidgetsPerSize); n > len(v1beta1.Sizes) {
		errs = append(errs, field.TooMany(q.Child("widgetsPerSize"), n, len(v1beta1.Sizes)))
	} else {
		for _, sz := range sortedKeys(s.Quotas.WidgetsPerSize) {
			p := q.Child("widgetsPerSize").Key(text.Shown(sz))
			if !slices.Contains(v1beta1.Sizes, v1beta1.Size(sz)) {
				errs = append(errs, field.NotSupported(p, text.Shown(sz), v1beta1.Sizes))
				continue
			}
			n := s.Quotas.WidgetsPerSize[sz]
			errs = append(errs, validateQuota(&n, p)...)
		}
	}
	return errs
}

func validateQuota(n *int64, p *field.Path) field.ErrorList {
	if n == nil || (*n >= 0 && *n <= maxQuota) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *n, fmt.Sprintf("must be between 0 and %d", maxQuota))}
}

// A limit is the narrowest value of one limit, and the policy objects that
// set it.
type limit struct {
	max int
	by  []string
}

// decidedBy names the object(s) that decided a limit.
func (l limit) decidedBy() string {
	if len(l.by) == 0 {
		return "the Composition's WidgetPolicy"
	}
	return strings.Join(l.by, " and ")
}

// subject is who decided a limit, with the verb "allow" agreeing.
func subject(by []string, decidedBy string) string {
	if len(by) > 1 {
		return decidedBy + " allow"
	}
	return decidedBy + " allows"
}

func (l limit) allow() string { return subject(l.by, l.decidedBy()) }

// narrow lowers l to n, set by policy p: the narrowest wins, and objects that
// set the same value share the decision.
func narrow(l *limit, n int, p string) {
	switch {
	case l.max < 0 || n < l.max:
		l.max, l.by = n, []string{p}
	case n == l.max && len(l.by) > 0:
		l.by = append(l.by, p)
	}
}

// An allowedSet is an allowed set of sizes or regions, and the objects that narrowed
// it. A nil list with restricted false allows everything.
type allowedSet struct {
	restricted bool
	items      []string
	by         []string
}

func (s allowedSet) allows(v string) bool { return !s.restricted || slices.Contains(s.items, v) }

func (s allowedSet) allow() string { return subject(s.by, s.decidedBy()) }

func (s allowedSet) decidedBy() string {
	if len(s.by) == 0 {
		return "the Composition's WidgetPolicy"
	}
	return strings.Join(s.by, " and ")
}

// narrowSet intersects s with items, set by policy p. Items s does not allow
// are a try to widen it: they are returned, not applied.
func narrowSet(s *allowedSet, items []string, p string) (ignored []string) {
	if len(items) == 0 {
		return nil
	}
	var kept []string
	for _, v := range items {
		if s.allows(v) {
			kept = append(kept, v)
			continue
		}
		ignored = append(ignored, v)
	}
	if !s.restricted || len(kept) < len(s.items) {
		s.by = append(s.by, p)
	}
	s.restricted, s.items = true, kept
	if s.items == nil {
		s.items = []string{}
	}
	return ignored
}

// namespaceLimits are the limits that apply to one namespace: the
// Composition's, narrowed by every valid namespace policy that selects the
// namespace. Two policies combine to the narrowest of each limit.
type namespaceLimits struct {
	namespace string

	sizes   allowedSet
	regions allowedSet
	maxKeys limit

	widgets        limit
	widgetsPerSize map[string]*limit
	keys           limit

	// applied are the valid policies that select the namespace, by name.
	applied []string
	// broken are the policies that may select the namespace but are
	// invalid: none of their limits is applied, and nothing new is
	// admitted while one is broken.
	broken []namespacePolicy
	// widened are the tries of namespace policies to widen the
	// Composition's policy, which are ignored.
	widened []string
}

// limitsFor combines the Composition's policy with the namespace policies that
// apply to the namespace. policies must be sorted by name, as Crossplane
// sends them.
func limitsFor(ns string, pol Composition, policies []namespacePolicy) namespaceLimits {
	l := namespaceLimits{
		namespace:      ns,
		maxKeys:        limit{max: pol.MaxKeys},
		widgets:        limit{max: -1},
		keys:           limit{max: -1},
		widgetsPerSize: map[string]*limit{},
	}
	if len(pol.AllowedSizes) > 0 {
		l.sizes = allowedSet{restricted: true, items: slices.Clone(pol.AllowedSizes)}
	}
	if len(pol.AllowedRegions) > 0 {
		l.regions = allowedSet{restricted: true, items: slices.Clone(pol.AllowedRegions)}
	}
	for _, p := range policies {
		if len(p.errs) > 0 {
			l.broken = append(l.broken, p)
			continue
		}
		l.applied = append(l.applied, p.String())
		if ign := narrowSet(&l.sizes, p.spec.Rules.AllowedSizes, p.String()); len(ign) > 0 {
			l.widened = append(l.widened, fmt.Sprintf("%s rules.allowedSizes %s", p, strings.Join(ign, ", ")))
		}
		if ign := narrowSet(&l.regions, p.spec.Rules.AllowedRegions, p.String()); len(ign) > 0 {
			l.widened = append(l.widened, fmt.Sprintf("%s rules.allowedRegions %s", p, strings.Join(ign, ", ")))
		}
		if m := p.spec.Rules.MaxKeys; m != nil {
			if int(*m) > pol.MaxKeys {
				l.widened = append(l.widened, fmt.Sprintf("%s rules.maxKeys %d (the Composition allows %d)", p, *m, pol.MaxKeys))
			} else {
				narrow(&l.maxKeys, int(*m), p.String())
			}
		}
		if q := p.spec.Quotas.Widgets; q != nil {
			narrow(&l.widgets, int(*q), p.String())
		}
		if q := p.spec.Quotas.Keys; q != nil {
			narrow(&l.keys, int(*q), p.String())
		}
		for _, sz := range sortedKeys(p.spec.Quotas.WidgetsPerSize) {
			if l.widgetsPerSize[sz] == nil {
				l.widgetsPerSize[sz] = &limit{max: -1}
			}
			narrow(l.widgetsPerSize[sz], int(p.spec.Quotas.WidgetsPerSize[sz]), p.String())
		}
	}
	return l
}

// hasQuota reports whether any quota applies.
func (l namespaceLimits) hasQuota() bool {
	if l.widgets.max >= 0 || l.keys.max >= 0 {
		return true
	}
	for _, q := range l.widgetsPerSize {
		if q.max >= 0 {
			return true
		}
	}
	return false
}

// summary says what the limits allow, for the PolicyCompliant condition. It
// holds limits only, never counts: a message that changed whenever another
// XWidget of the namespace came or went would rewrite every XWidget's status.
func (l namespaceLimits) summary() string {
	if len(l.applied) == 0 {
		if l.namespace == "" {
			return "the Composition's WidgetPolicy"
		}
		return "the Composition's WidgetPolicy; no namespace policy applies to " + l.namespace
	}
	parts := []string{}
	if l.sizes.restricted {
		parts = append(parts, "sizes "+listOrNone(l.sizes.items))
	}
	if l.regions.restricted {
		parts = append(parts, "regions "+listOrNone(l.regions.items))
	}
	parts = append(parts, fmt.Sprintf("at most %d %s per widget", l.maxKeys.max, text.Plural(l.maxKeys.max, "key", "keys")))
	if l.widgets.max >= 0 {
		parts = append(parts, fmt.Sprintf("%d %s in all", l.widgets.max, text.Plural(l.widgets.max, "widget", "widgets")))
	}
	for _, sz := range v1beta1.Sizes {
		if q := l.widgetsPerSize[string(sz)]; q != nil {
			parts = append(parts, fmt.Sprintf("%d %s %s", q.max, sz, text.Plural(q.max, "widget", "widgets")))
		}
	}
	if l.keys.max >= 0 {
		parts = append(parts, fmt.Sprintf("%d access %s in all", l.keys.max, text.Plural(l.keys.max, "key", "keys")))
	}
	return fmt.Sprintf("the Composition's WidgetPolicy narrowed for %s by %s: %s", l.namespace, strings.Join(l.applied, " and "), strings.Join(parts, "; "))
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
