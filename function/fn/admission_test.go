package fn

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/function/internal/nspolicy"
)

// burstXR is XWidget team-a/<name>, created at 10:00:00 with the given UID.
// Crossplane wrote its Synced condition at written: a call whose view holds
// that write, in a later second than 10:00:00, has seen every XR created in
// that second.
func burstXR(name, uid, written string, mods ...mod) map[string]any {
	c := xpCondition("Synced", "True", "ReconcileSuccess", "")
	c["lastTransitionTime"] = written
	return nsXR(append([]mod{
		set("metadata.name", name), set("metadata.uid", uid),
		set("metadata.creationTimestamp", "2026-11-27T10:00:00Z"),
		set("spec.keys", 1), conditions(c),
	}, mods...)...)
}

// burstUID is the UID of the i-th XWidget of a burst: they do not sort in
// the order of i, as real UIDs do not.
func burstUID(i int) string { return fmt.Sprintf("%08d-0000-4000-8000-000000000000", (i*19+7)%50) }

// admittedIn is the outcome of one call for an XR.
type admittedIn struct {
	Reason   string
	Composed bool // a Widget is in the desired state
	Fatal    bool
}

func callOutcome(t *testing.T, f *Function, req *fnv1.RunFunctionRequest) admittedIn {
	t.Helper()
	rsp, err := f.RunFunction(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got admittedIn
	for _, c := range rsp.GetConditions() {
		if c.GetType() == typePolicyCompliant {
			got.Reason = c.GetReason()
		}
	}
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			got.Fatal = true
		}
	}
	got.Composed = rsp.GetDesired().GetResources()["widget"] != nil
	return got
}

// TestQuotaBurst reproduces finding M3 of issue 42: 50 XWidgets applied
// together under quotas.widgets: 1, each call counting the namespace before
// any of their Widgets exists. Exactly one may compose a Widget, and every
// call must pick the same one whatever the order Crossplane lists the
// namespace's XWidgets in.
func TestQuotaBurst(t *testing.T) {
	const n = 50
	xrs := make([]map[string]any, n)
	for i := range n {
		xrs[i] = burstXR(fmt.Sprintf("web-%02d", i), burstUID(i), "2026-11-27T10:00:01Z")
	}
	// The one ordered first: created in the same second, the smallest UID,
	// web-47's.
	const first = 47
	policy := []map[string]any{policyEC("team-a", withQuotas(teamAPolicy(), map[string]any{"widgets": 1}))}
	nsA := namespaceObj("team-a", map[string]any{"widgetco.io/team": "team-a"})

	orders := map[string]func([]map[string]any) []map[string]any{
		"AsCreated": func(l []map[string]any) []map[string]any { return l },
		"Reversed": func(l []map[string]any) []map[string]any {
			l = slices.Clone(l)
			slices.Reverse(l)
			return l
		},
		"Shuffled": func(l []map[string]any) []map[string]any {
			l = slices.Clone(l)
			rand.New(rand.NewPCG(42, 1)).Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
			return l
		},
	}
	f, err := NewFunction()
	if err != nil {
		t.Fatal(err)
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			var admitted []string
			for i := range n {
				req := testRequest{xr: xrs[i], input: policyInput()}.build()
				req.RequiredResources = fetched{namespace: nsA, policies: policy, xwidgets: order(xrs)}.resources()
				got := callOutcome(t, f, req)
				if got.Composed {
					admitted = append(admitted, fmt.Sprintf("web-%02d", i))
				}
				if !got.Composed && (!got.Fatal || got.Reason != nspolicy.ReasonQuotaExceeded) {
					t.Errorf("web-%02d: neither admitted nor refused with %s: %+v", i, nspolicy.ReasonQuotaExceeded, got)
				}
			}
			want := []string{fmt.Sprintf("web-%02d", first)}
			if diff := cmp.Diff(want, admitted); diff != "" {
				t.Errorf("50 XWidgets created together under quotas.widgets: 1 must compose exactly one Widget, the one created first (then by UID), in every call: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestQueuedAdmission covers the rule a new XR is admitted by
// (internal/nspolicy/admission.go): its place after the namespace's other
// new XRs, and the wait until a call has seen every XR created in its second.
func TestQueuedAdmission(t *testing.T) {
	nsA := namespaceObj("team-a", map[string]any{"widgetco.io/team": "team-a"})
	quota := func(q, rules map[string]any) []map[string]any {
		p := withQuotas(teamAPolicy(), q)
		if rules != nil {
			p["rules"] = rules
		}
		return []map[string]any{policyEC("team-a", p)}
	}
	me := burstXR("web", burstUID(3), "2026-11-27T10:00:01Z")
	// An XR created a second before "web": ordered before it.
	older := func(name string, mods ...mod) map[string]any {
		return burstXR(name, burstUID(9), "2026-11-27T10:00:01Z", append([]mod{set("metadata.creationTimestamp", "2026-11-27T09:59:59Z")}, mods...)...)
	}
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return t
	}

	type want struct {
		Outcome admittedIn
		Message string
		TTL     time.Duration
	}
	cases := map[string]struct {
		reason  string
		xr      map[string]any
		fetched fetched
		now     time.Time
		want    want
	}{
		"FitsAfterTheOnesAhead": {
			reason:  "With a quota of 3, one widget and one older new XR, the XR fits: it is admitted.",
			xr:      me,
			fetched: fetched{widgets: []map[string]any{usedWidget("team-a", "api-1", "api", "small", "2026-11-27T09:00:00Z", false)}, xwidgets: []map[string]any{older("db"), me}},
			want:    want{Outcome: admittedIn{Reason: reasonCompliant, Composed: true}},
		},
		"NoRoomAfterTheOnesAhead": {
			reason:  "With a quota of 2, one widget and one older new XR, the XR does not fit: it is refused and composes nothing, naming who came first.",
			xr:      me,
			fetched: fetched{widgets: []map[string]any{usedWidget("team-a", "api-1", "api", "small", "2026-11-27T09:00:00Z", false)}, xwidgets: []map[string]any{me, older("db")}},
			want: want{Outcome: admittedIn{Reason: nspolicy.ReasonQuotaExceeded, Fatal: true},
				Message: "XWidget team-a/web exceeds a quota of namespace team-a; nothing that exists was changed: spec: Forbidden: team-a has 1 of 2 widgets (quota set by EnvironmentConfig team-a): api, and 1 XWidgets or claims created earlier wait for the rest: db"},
		},
		"HolderCountsOnce": {
			reason:  "An older XR whose Widget exists counts by its Widget, not again by its place in the queue: with a quota of 2 the XR fits.",
			xr:      me,
			fetched: fetched{widgets: []map[string]any{usedWidget("team-a", "db-1", "db", "small", "2026-11-27T09:59:59Z", false)}, xwidgets: []map[string]any{older("db"), me}},
			want:    want{Outcome: admittedIn{Reason: reasonCompliant, Composed: true}},
		},
		"DeletedXRHoldsNoPlace": {
			reason:  "An older XR being deleted will never compose: it holds no place.",
			xr:      me,
			fetched: fetched{xwidgets: []map[string]any{older("db", set("metadata.deletionTimestamp", "2026-11-27T10:00:00Z")), me}},
			want:    want{Outcome: admittedIn{Reason: reasonCompliant, Composed: true}},
		},
		"YoungerXRWaitsBehind": {
			reason:  "An XR created later holds no place before the XR: with a quota of 1 the XR is admitted.",
			xr:      me,
			fetched: fetched{xwidgets: []map[string]any{burstXR("zz", burstUID(9), "2026-11-27T10:00:03Z", set("metadata.creationTimestamp", "2026-11-27T10:00:02Z")), me}},
			want:    want{Outcome: admittedIn{Reason: reasonCompliant, Composed: true}},
		},
		"KeysReserved": {
			reason:  "An older new XR's keys are reserved too: with 3 keys in all, 2 taken by it, the XR's 2 do not fit.",
			xr:      burstXR("web", burstUID(3), "2026-11-27T10:00:01Z", set("spec.keys", 2)),
			fetched: fetched{xwidgets: []map[string]any{older("db", set("spec.keys", 2))}},
			want: want{Outcome: admittedIn{Reason: nspolicy.ReasonQuotaExceeded, Fatal: true},
				Message: "XWidget team-a/web exceeds a quota of namespace team-a; nothing that exists was changed: spec.keys: Forbidden: team-a has 0 of 3 access keys (quota set by EnvironmentConfig team-a), and XWidgets or claims created earlier wait for 2 more: db; this one asks for 2, at most 1 fit"},
		},
		"SizeReserved": {
			reason:  "An older new XR of the same size takes the last place of a per-size quota; one of another size does not.",
			xr:      me,
			fetched: fetched{xwidgets: []map[string]any{older("db"), older("cache", set("metadata.uid", burstUID(11)), set("spec.size", "small")), me}},
			want: want{Outcome: admittedIn{Reason: nspolicy.ReasonQuotaExceeded, Fatal: true},
				Message: "XWidget team-a/web exceeds a quota of namespace team-a; nothing that exists was changed: spec.size: Forbidden: team-a has 0 of 1 medium widgets (quota set by EnvironmentConfig team-a), and 1 XWidgets or claims created earlier wait for the rest: db"},
		},
		"WaitsInItsCreationSecond": {
			reason: "A view with no write after the XR's creation second may miss an XR created in that second and ordered before it: the XR waits, composes nothing, is not ready and is called again in a second.",
			xr:     burstXR("web", burstUID(3), "2026-11-27T10:00:00Z"),
			now:    at("2026-11-27T10:00:00.5Z"),
			want: want{Outcome: admittedIn{Reason: nspolicy.ReasonAdmissionPending}, TTL: time.Second,
				Message: "XWidget team-a/web waits for its place in the quotas of namespace team-a: XWidgets and claims created in the same second are counted first. Nothing is composed until then."},
		},
		"WaitMessageChangesAfterTheSecond": {
			reason: "Once the second has passed, the waiting XR's message changes, so that Crossplane writes it after that second: the next call sees that write.",
			xr:     burstXR("web", burstUID(3), "2026-11-27T10:00:00Z"),
			now:    at("2026-11-27T10:00:01.2Z"),
			want: want{Outcome: admittedIn{Reason: nspolicy.ReasonAdmissionPending}, TTL: time.Second,
				Message: "XWidget team-a/web waits for its place in the quotas of namespace team-a: Crossplane is counting the XWidgets and claims created in the same second. Nothing is composed until then."},
		},
		"AdmittedOnceTheWriteIsSeen": {
			reason: "The observed XR shows the waiting condition written after its creation second: the view is complete and the XR is admitted.",
			xr: burstXR("web", burstUID(3), "2026-11-27T10:00:00Z", conditions(map[string]any{
				"type": "PolicyCompliant", "status": "Unknown", "reason": "AdmissionPending", "lastTransitionTime": "2026-11-27T10:00:01Z",
				"message": "XWidget team-a/web waits for its place in the quotas of namespace team-a: Crossplane is counting the XWidgets and claims created in the same second. Nothing is composed until then.",
			})),
			now:  at("2026-11-27T10:00:01.3Z"),
			want: want{Outcome: admittedIn{Reason: reasonCompliant, Composed: true}},
		},
		"RefusedXRHoldsNoPlace": {
			reason:  "Older new XRs whose size or key count the namespace's rules refuse are refused by their own calls and compose nothing: they hold no place, and the XR takes the one slot.",
			xr:      me,
			fetched: fetched{xwidgets: []map[string]any{older("db", set("spec.size", "large")), older("cache", set("metadata.uid", burstUID(11)), set("spec.keys", 3)), me}},
			want:    want{Outcome: admittedIn{Reason: reasonCompliant, Composed: true}},
		},
		"RefusedWithoutWaiting": {
			reason: "An XR that does not fit even in an incomplete view is refused at once: XRs the view misses can only take places before it.",
			xr:     burstXR("web", burstUID(3), "2026-11-27T10:00:00Z"),
			fetched: fetched{xwidgets: []map[string]any{
				burstXR("db", burstUID(47), "2026-11-27T10:00:00Z"),
				burstXR("api", burstUID(8), "2026-11-27T10:00:00Z"),
			}},
			now: at("2026-11-27T10:00:00.5Z"),
			want: want{Outcome: admittedIn{Reason: nspolicy.ReasonQuotaExceeded, Fatal: true},
				Message: "XWidget team-a/web exceeds a quota of namespace team-a; nothing that exists was changed: spec: Forbidden: team-a has 0 of 2 widgets (quota set by EnvironmentConfig team-a), and 2 XWidgets or claims created earlier wait for the rest: db, api"},
		},
	}
	quotas := map[string]map[string]any{
		"FitsAfterTheOnesAhead":            {"widgets": 3},
		"NoRoomAfterTheOnesAhead":          {"widgets": 2},
		"HolderCountsOnce":                 {"widgets": 2},
		"DeletedXRHoldsNoPlace":            {"widgets": 1},
		"YoungerXRWaitsBehind":             {"widgets": 1},
		"KeysReserved":                     {"keys": 3},
		"SizeReserved":                     {"widgetsPerSize": map[string]any{"medium": 1}},
		"WaitsInItsCreationSecond":         {"widgets": 1},
		"WaitMessageChangesAfterTheSecond": {"widgets": 1},
		"AdmittedOnceTheWriteIsSeen":       {"widgets": 1},
		"RefusedWithoutWaiting":            {"widgets": 2},
		"RefusedXRHoldsNoPlace":            {"widgets": 1},
	}
	rules := map[string]map[string]any{
		"RefusedXRHoldsNoPlace": {"allowedSizes": []any{"small", "medium"}, "maxKeys": 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := NewFunction()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.now.IsZero() {
				f.clock = func() time.Time { return tc.now }
			}
			req := testRequest{xr: tc.xr, input: policyInput()}.build()
			tc.fetched.namespace, tc.fetched.policies = nsA, quota(quotas[name], rules[name])
			req.RequiredResources = tc.fetched.resources()
			rsp, err := f.RunFunction(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := want{Outcome: callOutcome(t, f, req)}
			for _, c := range rsp.GetConditions() {
				if c.GetType() == typePolicyCompliant && !got.Outcome.Composed {
					got.Message = c.GetMessage()
				}
			}
			if got.Outcome.Reason == nspolicy.ReasonAdmissionPending {
				got.TTL = rsp.GetMeta().GetTtl().AsDuration()
				if r := rsp.GetDesired().GetComposite().GetReady(); r != fnv1.Ready_READY_FALSE {
					t.Errorf("%s\na waiting XR must not be ready: desired composite ready %v", tc.reason, r)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
