package fn

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
)

// The two teams of docs/policy.md: team-a may run small and medium widgets
// with up to 3 keys, at most 5 widgets; team-b small ones in us-east-1 with
// one key, at most 3 widgets, no large one and 4 keys in all.
func teamAPolicy() map[string]any {
	return map[string]any{
		"namespaceSelector": forTeam("team-a"),
		"quotas":            map[string]any{"widgets": 5},
	}
}

func teamBPolicy() map[string]any {
	return map[string]any{
		"namespaceSelector": forTeam("team-b"),
		"rules":             map[string]any{"allowedSizes": []any{"small"}, "allowedRegions": []any{"us-east-1"}, "maxKeys": 1},
		"quotas":            map[string]any{"widgets": 3, "widgetsPerSize": map[string]any{"large": 0}, "keys": 4},
	}
}

// withQuotas returns p with its quotas replaced.
func withQuotas(p map[string]any, q map[string]any) map[string]any {
	p["quotas"] = q
	return p
}

func TestNamespacePolicy(t *testing.T) {
	nsA := namespaceObj("team-a", map[string]any{"widgetco.io/team": "team-a"})
	nsB := namespaceObj("team-b", map[string]any{"widgetco.io/team": "team-b"})
	both := []map[string]any{policyEC("team-a", teamAPolicy()), policyEC("team-b", teamBPolicy())}
	inB := set("metadata.namespace", "team-b")
	small := set("spec.size", "small")
	oneKey := set("spec.keys", 1)
	// The own Widget of nsXR, once it exists: the XR was admitted.
	ownWidget := map[string]*fnv1.Resource{"widget": observed(nsWidget(), nil)}
	ownWidgetB := map[string]*fnv1.Resource{"widget": observed(nsWidget(set("metadata.namespace", "team-b")), nil)}
	// The own Widget, Ready a minute after it was created.
	ownWidgetReady := map[string]*fnv1.Resource{"widget": observed(nsWidget(widgetReady(nsEndpoint),
		set("metadata.creationTimestamp", "2026-11-27T11:00:00Z"),
		conditions(map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-27T11:01:00Z"})), nil)}
	// What a Compliant condition adds while a racing XWidget may still be
	// ordered before the XR.
	const provisional = " Its place in the namespace's quotas is provisional until its widget is ready."

	type want struct {
		status  fnv1.Status
		reason  string
		message string
		// composed is whether the function composes the XR (no fatal
		// result).
		composed bool
	}
	cases := map[string]struct {
		reason   string
		xr       map[string]any
		observed map[string]*fnv1.Resource
		fetched  *fetched
		want     want
	}{
		"NotFetchedYet": {
			reason: "Before Crossplane fetched what the function asked for, it decides on the Composition's policy alone; Crossplane calls it again.",
			xr:     nsXR(),
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."},
		},
		"NoPolicyApplies": {
			reason:  "A namespace no policy selects gets the Composition's policy, and the condition says so.",
			xr:      nsXR(),
			fetched: &fetched{namespace: namespaceObj("team-a", nil), policies: both},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."},
		},
		"AdmittedInTeamA": {
			reason:  "team-a's policy allows the XWidget: the condition names the policy object and its limits.",
			xr:      nsXR(),
			fetched: &fetched{namespace: nsA, policies: both},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 5 widgets in all." + provisional},
		},
		"RejectedInTeamB": {
			reason:  "The same XWidget in team-b asks for a size and more keys than team-b's policy allows: each field is named with the object that decided.",
			xr:      nsXR(inB),
			fetched: &fetched{namespace: nsB, policies: both},
			want: want{status: condFalse, reason: "PolicyViolation",
				message: `XWidget team-b/web violates the widget policy of namespace team-b; change these fields: spec.size: Invalid value: "medium": EnvironmentConfig team-b allows only small in team-b; spec.keys: Invalid value: 2: EnvironmentConfig team-b allows 0 to 1 access keys in team-b`},
		},
		"RegionNarrowed": {
			reason:  "team-b allows only us-east-1: a new widget elsewhere is rejected.",
			xr:      nsXR(inB, small, oneKey, set("spec.region", "eu-west-1")),
			fetched: &fetched{namespace: nsB, policies: both},
			want: want{status: condFalse, reason: "PolicyViolation",
				message: `XWidget team-b/web violates the widget policy of namespace team-b; change these fields: spec.region: Invalid value: "eu-west-1": EnvironmentConfig team-b allows only us-east-1 in team-b`},
		},
		"WideningIgnored": {
			reason: "A policy that allows more than the Composition does is not applied beyond the Composition's limits, and the condition says what was ignored.",
			xr:     nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", map[string]any{
				"namespaceSelector": forTeam("team-a"),
				"rules":             map[string]any{"allowedSizes": []any{"medium", "large"}, "maxKeys": 5},
			})}},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes medium; regions us-east-1, eu-west-1; at most 3 keys per widget. Ignored, because a namespace policy can only narrow the Composition's: EnvironmentConfig team-a rules.allowedSizes large; EnvironmentConfig team-a rules.maxKeys 5 (the Composition allows 3)."},
		},
		"WideningNeverAdmits": {
			reason: "A size the Composition refuses stays refused whatever a namespace policy allows: the Composition's rejection comes first.",
			xr:     nsXR(set("spec.size", "large")),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", map[string]any{
				"namespaceSelector": forTeam("team-a"),
				"rules":             map[string]any{"allowedSizes": []any{"large"}},
			})}},
			want: want{status: condFalse, reason: "PolicyViolation",
				message: `XWidget team-a/web violates the platform's widget policy; change these fields: spec.size: Unsupported value: "large": supported values: "small", "medium"`},
		},
		"TwoPoliciesNarrowest": {
			reason: "Two policies that select the namespace combine to the narrowest of each limit; the one that set it is named.",
			xr:     nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{
				policyEC("keys", map[string]any{"namespaceSelector": forTeam("team-a"), "rules": map[string]any{"maxKeys": 1}}),
				policyEC("sizes", map[string]any{"namespaceSelector": map[string]any{}, "rules": map[string]any{"allowedSizes": []any{"medium"}, "maxKeys": 2}}),
			}},
			want: want{status: condFalse, reason: "PolicyViolation",
				message: `XWidget team-a/web violates the widget policy of namespace team-a; change these fields: spec.keys: Invalid value: 2: EnvironmentConfig keys allows 0 to 1 access keys in team-a`},
		},
		"TwoPoliciesSameLimit": {
			reason: "Two policies that set the same narrowest limit are both named.",
			xr:     nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{
				policyEC("keys", map[string]any{"namespaceSelector": forTeam("team-a"), "rules": map[string]any{"maxKeys": 1}}),
				policyEC("more-keys", map[string]any{"namespaceSelector": forTeam("team-a"), "rules": map[string]any{"maxKeys": 1}}),
			}},
			want: want{status: condFalse, reason: "PolicyViolation",
				message: `XWidget team-a/web violates the widget policy of namespace team-a; change these fields: spec.keys: Invalid value: 2: EnvironmentConfig keys and EnvironmentConfig more-keys allow 0 to 1 access keys in team-a`},
		},
		"PolicyNoLongerSelectsNamespace": {
			reason:   "A namespace whose label no longer matches (or whose policy was deleted) is back to the Composition's policy at the next call.",
			xr:       nsXR(inB, small, oneKey),
			observed: ownWidgetB,
			fetched:  &fetched{namespace: namespaceObj("team-b", map[string]any{"widgetco.io/team": "team-c"}), policies: both},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-b/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-b."},
		},
		"WidgetQuota": {
			reason: "team-b has 3 of 3 widgets, one of them a claim's: a new XWidget is rejected on a quota, naming who has them.",
			xr:     nsXR(inB, small, oneKey),
			fetched: &fetched{namespace: nsB, policies: both,
				widgets:       []map[string]any{usedWidget("team-b", "api-1", "api", "small", "2026-11-27T10:00:00Z", false), usedWidget("team-b", "db-1", "db", "small", "2026-11-27T10:00:01Z", false)},
				legacyWidgets: []map[string]any{usedWidget("team-b", "queue-x7k2p-1", "queue", "small", "2026-11-27T10:00:02Z", true)},
			},
			want: want{status: condFalse, reason: "QuotaExceeded",
				message: "XWidget team-b/web exceeds a quota of namespace team-b; nothing that exists was changed: spec: Forbidden: team-b already has 3 of 3 widgets (quota set by EnvironmentConfig team-b): api, db, queue"},
		},
		"ClaimCannotDodgeQuota": {
			reason: "A WidgetClaim counts the namespace's XWidgets' widgets too: team-b's claim is rejected on the same quota.",
			xr:     legacyXR(unset("spec.region"), small),
			fetched: &fetched{namespace: nsB, policies: []map[string]any{policyEC("team-b", withQuotas(teamBPolicy(), map[string]any{"widgets": 1}))},
				widgets: []map[string]any{usedWidget("team-b", "api-1", "api", "small", "2026-11-27T10:00:00Z", false)},
			},
			want: want{status: condFalse, reason: "QuotaExceeded",
				message: "WidgetClaim team-b/web exceeds a quota of namespace team-b; nothing that exists was changed: spec: Forbidden: team-b already has 1 of 1 widgets (quota set by EnvironmentConfig team-b): api"},
		},
		"SizeQuota": {
			reason: "team-b already has 3 of 3 large widgets: a new large one is rejected on spec.size.",
			xr:     nsXR(set("spec.size", "medium")),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgetsPerSize": map[string]any{"medium": 3}}))},
				widgets: []map[string]any{
					usedWidget("team-a", "a-1", "a", "medium", "", false), usedWidget("team-a", "b-1", "b", "medium", "", false),
					usedWidget("team-a", "c-1", "c", "small", "", false), usedWidget("team-a", "d-1", "d", "medium", "", false),
				},
			},
			want: want{status: condFalse, reason: "QuotaExceeded",
				message: "XWidget team-a/web exceeds a quota of namespace team-a; nothing that exists was changed: spec.size: Forbidden: team-a already has 3 of 3 medium widgets (quota set by EnvironmentConfig team-a): a, b, d"},
		},
		"KeyQuota": {
			reason: "team-b has 4 keys of a quota of 4: a new widget with a key does not fit.",
			xr:     nsXR(inB, small, oneKey),
			fetched: &fetched{namespace: nsB, policies: both,
				keys:       []map[string]any{usedKey("team-b", "k1", false), usedKey("team-b", "k2", false), usedKey("team-b", "k3", false)},
				legacyKeys: []map[string]any{usedKey("team-b", "k4", true)},
			},
			want: want{status: condFalse, reason: "QuotaExceeded",
				message: "XWidget team-b/web exceeds a quota of namespace team-b; nothing that exists was changed: spec.keys: Forbidden: team-b already has 4 of 4 access keys in other widgets (quota set by EnvironmentConfig team-b); this one asks for 1, at most 0 fit"},
		},
		"AdmittedStaysWhenQuotaLowered": {
			reason:   "An XWidget whose Widget exists was admitted: when the quota is lowered below what the namespace has, it is still composed as it is, and reported.",
			xr:       nsXR(),
			observed: ownWidget,
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgets": 1}))},
				widgets: []map[string]any{usedWidget("team-a", "api-1", "api", "small", "2026-11-27T10:00:00Z", false), usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-11-27T11:00:00Z", false)},
			},
			want: want{status: condFalse, reason: "AdmittedOverLimit", composed: true,
				message: "XWidget team-a/web was admitted earlier and stays as it is, but it cannot grow: team-a has 2 widgets, more than the quota of 1 set by EnvironmentConfig team-a. Limits: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 1 widget in all."},
		},
		"AdmittedKeysOverQuota": {
			reason: "An admitted XWidget that keeps the keys it has stays when the key quota drops below what the namespace has; it is reported.",
			xr:     nsXR(),
			observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(), nil),
				"key-0":  observed(nsKey(0), nil),
				"key-1":  observed(nsKey(1), nil),
			},
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"keys": 3}))},
				widgets: []map[string]any{usedWidget("team-a", "web-8k2mz", "web", "medium", "", false)},
				keys:    []map[string]any{usedKey("team-a", "web-q2w7d", false), usedKey("team-a", "web-m5n8c", false), usedKey("team-a", "api-k1", false), usedKey("team-a", "api-k2", false)},
			},
			want: want{status: condFalse, reason: "AdmittedOverLimit", composed: true,
				message: "XWidget team-a/web was admitted earlier and stays as it is, but it cannot grow: team-a has 4 access keys, more than the quota of 3 set by EnvironmentConfig team-a. Limits: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 3 access keys in all."},
		},
		"AdmittedWithinQuota": {
			reason:   "Of two widgets and a quota of 1, the older one is within the quota: its XWidget complies, provisionally while its Widget is not Ready.",
			xr:       nsXR(),
			observed: ownWidget,
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgets": 1}))},
				widgets: []map[string]any{usedWidget("team-a", "api-1", "api", "small", "2026-11-27T12:00:00Z", false), usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-11-27T11:00:00Z", false)},
			},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 1 widget in all." + provisional},
		},
		"AdmittedWithinQuotaFinal": {
			reason:   "Counted with its Widget Ready after its creation second, the XWidget's place is final: the condition that settles it (settledInNamespace).",
			xr:       nsXR(set("spec.keys", 0)),
			observed: ownWidgetReady,
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgets": 1}))},
				widgets: []map[string]any{usedWidget("team-a", "api-1", "api", "small", "2026-11-27T12:00:00Z", false), usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-11-27T11:00:00Z", false)},
			},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 1 widget in all."},
		},
		"ReadyWithinQuotaLaterReported": {
			reason:   "A provisionally compliant XWidget whose Widget became Ready counts again and finds a widget of the same second ordered before it (a racing XWidget's): it is reported over the quota.",
			xr:       nsXR(set("spec.keys", 0), conditions(xpCondition("PolicyCompliant", "True", "Compliant", "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 1 widget in all."+provisional))),
			observed: ownWidgetReady,
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgets": 1}))},
				widgets: []map[string]any{usedWidget("team-a", "one-2abcd", "one", "small", "2026-11-27T11:00:00Z", false), usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-11-27T11:00:00Z", false)},
			},
			want: want{status: condFalse, reason: "AdmittedOverLimit", composed: true,
				message: "XWidget team-a/web was admitted earlier and stays as it is, but it cannot grow: team-a has 2 widgets, more than the quota of 1 set by EnvironmentConfig team-a. Limits: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 1 widget in all."},
		},
		"RaceSameSecondLaterNameReported": {
			reason:   "Two XWidgets admitted in the same second with one slot left: the widgets are ordered by age, then name, so the one that sorts later is reported over the quota.",
			xr:       nsXR(),
			observed: ownWidget,
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgets": 1}))},
				widgets: []map[string]any{usedWidget("team-a", "api-1", "api", "small", "2026-11-27T10:00:00Z", false), usedWidget("team-a", "web-8k2mz", "web", "medium", "2026-11-27T10:00:00Z", false)},
			},
			want: want{status: condFalse, reason: "AdmittedOverLimit", composed: true,
				message: "XWidget team-a/web was admitted earlier and stays as it is, but it cannot grow: team-a has 2 widgets, more than the quota of 1 set by EnvironmentConfig team-a. Limits: the Composition's WidgetPolicy narrowed for team-a by EnvironmentConfig team-a: sizes small, medium; regions us-east-1, eu-west-1; at most 3 keys per widget; 1 widget in all."},
		},
		"AdmittedStaysWhenSizeNarrowed": {
			reason:   "team-b's policy now allows only small widgets: an admitted medium one stays as it is, reported.",
			xr:       nsXR(inB, oneKey),
			observed: ownWidgetB,
			fetched: &fetched{namespace: nsB, policies: both,
				widgets: []map[string]any{usedWidget("team-b", "web-8k2mz", "web", "medium", "", false)},
			},
			want: want{status: condFalse, reason: "AdmittedOverLimit", composed: true,
				message: "XWidget team-b/web was admitted earlier and stays as it is, but it cannot grow: spec.size medium is no longer allowed by EnvironmentConfig team-b (allowed: small). Limits: the Composition's WidgetPolicy narrowed for team-b by EnvironmentConfig team-b: sizes small; regions us-east-1; at most 1 key per widget; 3 widgets in all; 0 large widgets; 4 access keys in all."},
		},
		"AdmittedCannotGrow": {
			reason:   "An admitted XWidget that asks for more keys than team-b allows is rejected: only what it has is kept.",
			xr:       nsXR(inB, small, set("spec.keys", 2)),
			observed: ownWidgetB,
			fetched: &fetched{namespace: nsB, policies: both,
				widgets: []map[string]any{usedWidget("team-b", "web-8k2mz", "web", "small", "", false)},
			},
			want: want{status: condFalse, reason: "PolicyViolation",
				message: `XWidget team-b/web violates the widget policy of namespace team-b; change these fields: spec.keys: Invalid value: 2: EnvironmentConfig team-b allows 0 to 1 access keys in team-b`},
		},
		"UnknownField": {
			reason: "A policy with an unknown field is not applied, and no new XWidget is admitted in the namespaces it may select; the condition names the object and the field.",
			xr:     nsXR(inB, small, oneKey),
			fetched: &fetched{namespace: nsB, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": forTeam("team-b"),
				"rules":             map[string]any{"maxKey": 1},
			})}},
			want: want{status: condFalse, reason: "InvalidNamespacePolicy",
				message: `XWidget team-b/web cannot be admitted: a namespace policy that may apply to team-b is invalid, so no new XWidget is admitted there until the platform team fixes it. EnvironmentConfig team-b is invalid: data.widgetPolicy.rules.maxKey: Forbidden: unknown field; the known fields are allowedSizes, allowedRegions, maxKeys`},
		},
		"WrongType": {
			reason: "A policy with a value of the wrong type is reported with the field.",
			xr:     nsXR(inB, small, oneKey),
			fetched: &fetched{namespace: nsB, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": forTeam("team-b"),
				"quotas":            map[string]any{"widgets": "three"},
			})}},
			want: want{status: condFalse, reason: "InvalidNamespacePolicy",
				message: `XWidget team-b/web cannot be admitted: a namespace policy that may apply to team-b is invalid, so no new XWidget is admitted there until the platform team fixes it. EnvironmentConfig team-b is invalid: data.widgetPolicy.quotas.widgets: Invalid value: must be an integer, not string`},
		},
		"ContradictoryLimits": {
			reason: "Limits no XWidget can have (a negative quota, an unknown size, more keys than any widget has) are each reported.",
			xr:     nsXR(inB, small, oneKey),
			fetched: &fetched{namespace: nsB, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": forTeam("team-b"),
				"rules":             map[string]any{"allowedSizes": []any{"huge"}, "maxKeys": 11},
				"quotas":            map[string]any{"widgets": -1},
			})}},
			want: want{status: condFalse, reason: "InvalidNamespacePolicy",
				message: `XWidget team-b/web cannot be admitted: a namespace policy that may apply to team-b is invalid, so no new XWidget is admitted there until the platform team fixes it. EnvironmentConfig team-b is invalid: data.widgetPolicy.rules.allowedSizes[0]: Unsupported value: "huge": supported values: "small", "medium", "large"; data.widgetPolicy.rules.maxKeys: Invalid value: 11: must be between 0 and 10; data.widgetPolicy.quotas.widgets: Invalid value: -1: must be between 0 and 10000`},
		},
		"MissingPolicy": {
			reason:  "An EnvironmentConfig with the policy label but no policy may be meant for any namespace: it blocks new XWidgets with a clear message.",
			xr:      nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("oops", nil)}},
			want: want{status: condFalse, reason: "InvalidNamespacePolicy",
				message: `XWidget team-a/web cannot be admitted: a namespace policy that may apply to team-a is invalid, so no new XWidget is admitted there until the platform team fixes it. EnvironmentConfig oops is invalid: data.widgetPolicy: Required value: an EnvironmentConfig labelled fn.widgetco.io/widget-policy=true must hold a namespace policy here`},
		},
		"BrokenPolicyOfAnotherTeam": {
			reason: "A broken policy whose selector does not select the namespace does not concern it.",
			xr:     nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": forTeam("team-b"),
				"rules":             map[string]any{"maxKeys": -1},
			})}},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."},
		},
		"TypoInAnotherTeamsPolicy": {
			reason: "A policy with an unknown field still says which namespaces it is meant for: it does not block another team's.",
			xr:     nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": forTeam("team-b"),
				"rules":             map[string]any{"maxKey": 1},
			})}},
			want: want{status: condTrue, reason: "Compliant", composed: true,
				message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."},
		},
		"UnreadableSelectorBlocksEveryNamespace": {
			reason: "A policy whose selector cannot be read may be meant for any namespace: new XWidgets everywhere are refused, naming it.",
			xr:     nsXR(),
			fetched: &fetched{namespace: nsA, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "widgetco.io/team", "operator": "Within"}}},
			})}},
			want: want{status: condFalse, reason: "InvalidNamespacePolicy",
				message: `XWidget team-a/web cannot be admitted: a namespace policy that may apply to team-a is invalid, so no new XWidget is admitted there until the platform team fixes it. EnvironmentConfig team-b is invalid: data.widgetPolicy.namespaceSelector: Invalid value: "Within" is not a valid label selector operator`},
		},
		"BrokenPolicyAdmittedStays": {
			reason:   "An admitted XWidget is still composed while a policy of its namespace is broken; its condition names the object.",
			xr:       nsXR(inB, small, oneKey),
			observed: ownWidgetB,
			fetched: &fetched{namespace: nsB, policies: []map[string]any{policyEC("team-b", map[string]any{
				"namespaceSelector": forTeam("team-b"),
				"rules":             map[string]any{"maxKeys": -1},
			})}},
			want: want{status: condFalse, reason: "InvalidNamespacePolicy", composed: true,
				message: "XWidget team-b/web was admitted earlier and stays as it is, but it cannot grow: no new XWidget is admitted in team-b until the platform team fixes it: EnvironmentConfig team-b is invalid: data.widgetPolicy.rules.maxKeys: Invalid value: -1: must be between 0 and 10. Limits: the Composition's WidgetPolicy; no namespace policy applies to team-b."},
		},
	}

	f, err := NewFunction()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := testRequest{xr: tc.xr, input: policyInput(), observed: tc.observed}.build()
			if tc.fetched != nil {
				req.RequiredResources = tc.fetched.resources()
			}
			rsp, err := f.RunFunction(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			var got want
			for _, c := range rsp.GetConditions() {
				if c.GetType() == typePolicyCompliant {
					got.status, got.reason, got.message = c.GetStatus(), c.GetReason(), c.GetMessage()
				}
			}
			got.composed = true
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					got.composed = false
				}
			}
			if got.composed && rsp.GetDesired().GetResources()["widget"] == nil {
				t.Errorf("%s\nno fatal result, but no Widget is composed", tc.reason)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nPolicyCompliant: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
