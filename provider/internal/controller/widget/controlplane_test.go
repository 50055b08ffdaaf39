package widget

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestControlPlanes drives a Widget of control plane "b" through Observe, and
// Update when Observe asks for one, against a widget that carries the
// resource's own owner marker, as after a restore or a migration into a
// second control plane.
func TestControlPlanes(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testControlPlanes(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testControlPlanes(t, newCluster) })
}

func testControlPlanes[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
	now := time.Now().Truncate(time.Second)
	ago := func(d time.Duration) string { return strconv.FormatInt(now.Add(-d).Unix(), 10) }
	cpA := map[string]string{ownership.ControlPlaneLabel: "a"}
	cpB := map[string]string{ownership.ControlPlaneLabel: "b"}
	contest := func(by string, d time.Duration) map[string]string {
		return map[string]string{ownership.ContenderLabel: by, ownership.ContendedAtLabel: ago(d)}
	}
	type want struct {
		err      bool
		mentions []string
		exists   bool
		// updated says Observe asked for an update, which the test then runs.
		updated bool
		// labels are the widget's reserved labels afterwards, besides the
		// owner marker; "{now}" stands for now's Unix seconds.
		labels map[string]string
		size   string
		// written says the widget's generation moved.
		written   bool
		condition *xpv2.Condition
		events    []event.Reason
	}
	cases := map[string]struct {
		reason string
		// labels are the widget's reserved labels besides the owner marker.
		labels map[string]string
		mods   []mod
		want   want
	}{
		"Contender": {
			reason: "A resource of control plane b whose widget control plane a manages changes none of its fields, says once that it is there, and reports how to take over.",
			labels: cpA,
			mods:   []mod{withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") })), synced()},
			want: want{err: true, mentions: []string{"managed by control plane a", "this is control plane b", "widgetco.io/take-over-from=a"},
				labels: merged(cpA, map[string]string{ownership.ContenderLabel: "b", ownership.ContendedAtLabel: "{now}"}), size: "small", written: true},
		},
		"ContenderSaidRecently": {
			reason: "A contender that said so within the refresh interval writes nothing.",
			labels: merged(cpA, contest("b", time.Minute)),
			mods:   []mod{withSpec(full)},
			want:   want{err: true, mentions: []string{"managed by control plane a"}, labels: merged(cpA, contest("b", time.Minute)), size: "small"},
		},
		"ContenderSaidLongAgo": {
			reason: "A contender says it again once the refresh interval has passed, so the owner keeps seeing a fresh contest.",
			labels: merged(cpA, contest("b", ownership.ContestRefresh+time.Minute)),
			mods:   []mod{withSpec(full)},
			want: want{err: true, labels: merged(cpA, map[string]string{ownership.ContenderLabel: "b", ownership.ContendedAtLabel: "{now}"}),
				size: "small", written: true},
		},
		"ContenderDeleted": {
			reason: "Deleting the contender's resource neither deletes nor writes the widget: it does not exist for that resource.",
			labels: cpA,
			mods:   []mod{withSpec(full), deleted()},
			want:   want{labels: cpA, size: "small", events: []event.Reason{ReasonLeftToControlPlane}},
		},
		"ContenderObserveOnly": {
			reason: "An Observe-only resource (a restore's first step) observes another control plane's widget without a word to it, and says how to take over.",
			labels: cpA,
			mods:   []mod{withSpec(full), observeOnlyPolicy()},
			want: want{exists: true, labels: cpA, size: "small",
				condition: &xpv2.Condition{Type: TypeControlPlane, Status: corev1.ConditionFalse, Reason: ReasonOtherControlPlane}},
		},
		"TakeOver": {
			reason: "A resource annotated to take over from the widget's control plane manages it: its control plane's label, the take-over's time, no contest left, and its spec applied.",
			labels: merged(cpA, contest("b", time.Minute)),
			mods:   []mod{withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") })), takeOverFrom("a")},
			want: want{exists: true, updated: true, labels: merged(cpB, map[string]string{ownership.TakenOverAtLabel: "{now}"}), size: "large", written: true,
				condition: &xpv2.Condition{Type: TypeControlPlane, Status: corev1.ConditionTrue, Reason: ReasonSoleControlPlane},
				events:    []event.Reason{ReasonTookOver}},
		},
		"TakeOverFromAnother": {
			reason: "An annotation that names another control plane than the widget's is no take-over.",
			labels: cpA,
			mods:   []mod{withSpec(full), takeOverFrom("c")},
			want:   want{err: true, mentions: []string{"managed by control plane a"}, labels: merged(cpA, map[string]string{ownership.ContenderLabel: "b", ownership.ContendedAtLabel: "{now}"}), size: "small", written: true},
		},
		"TakeOverTooSoon": {
			reason: "A take-over within the contest TTL of the last one is refused: two control planes annotated to take over from each other never hand the widget back and forth.",
			labels: merged(cpA, map[string]string{ownership.TakenOverAtLabel: ago(2 * time.Minute)}),
			mods:   []mod{withSpec(full), takeOverFrom("a")},
			want:   want{err: true, mentions: []string{"taken over by control plane a", "remove the widgetco.io/take-over-from annotation"}, labels: merged(cpA, map[string]string{ownership.TakenOverAtLabel: ago(2 * time.Minute)}), size: "small"},
		},
		"TakeOverLongAfter": {
			reason: "Once the last take-over is older than the contest TTL, a take-over goes ahead.",
			labels: merged(cpA, map[string]string{ownership.TakenOverAtLabel: ago(ownership.ContestTTL + time.Minute)}),
			mods:   []mod{withSpec(full), takeOverFrom("a")},
			want: want{exists: true, updated: true, labels: merged(cpB, map[string]string{ownership.TakenOverAtLabel: "{now}"}), size: "small", written: true,
				condition: &xpv2.Condition{Type: TypeControlPlane, Status: corev1.ConditionTrue, Reason: ReasonSoleControlPlane},
				events:    []event.Reason{ReasonTookOver}},
		},
		"OwnerContested": {
			reason: "The owner reports a fresh contest on its own resource, with a warning, and writes nothing.",
			labels: merged(cpB, contest("a", time.Minute)),
			mods:   []mod{withSpec(full)},
			want: want{exists: true, labels: merged(cpB, contest("a", time.Minute)), size: "small",
				condition: &xpv2.Condition{Type: TypeControlPlane, Status: corev1.ConditionFalse, Reason: ReasonContested},
				events:    []event.Reason{event.Reason(ReasonContested)}},
		},
		"OwnerContestStale": {
			reason: "A contest older than its TTL is over: the condition turns back, and the stale labels stay (only a take-over or release removes them).",
			labels: merged(cpB, contest("a", ownership.ContestTTL+time.Minute)),
			mods:   []mod{withSpec(full), contested()},
			want: want{exists: true, labels: merged(cpB, contest("a", ownership.ContestTTL+time.Minute)), size: "small",
				condition: &xpv2.Condition{Type: TypeControlPlane, Status: corev1.ConditionTrue, Reason: ReasonSoleControlPlane}},
		},
		"OwnerContestFromTheFuture": {
			reason: "A contest dated further ahead than clocks can disagree was not written by a provider, and does not count for ever.",
			labels: merged(cpB, contest("a", -time.Hour)),
			mods:   []mod{withSpec(full)},
			want:   want{exists: true, labels: merged(cpB, contest("a", -time.Hour)), size: "small"},
		},
		"OwnerUpdateKeepsContest": {
			reason: "The owner's update for a spec change keeps the contest for the contender's own word to end.",
			labels: merged(cpB, contest("a", time.Minute)),
			mods:   []mod{withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{exists: true, updated: true, labels: merged(cpB, contest("a", time.Minute)), size: "large", written: true,
				condition: &xpv2.Condition{Type: TypeControlPlane, Status: corev1.ConditionFalse, Reason: ReasonContested},
				events:    []event.Reason{event.Reason(ReasonContested), ReasonUpdated}},
		},
		"Upgrade": {
			reason: "A widget this resource manages from before control planes were named gets this control plane's label, as the provider's own change, not drift.",
			mods:   []mod{withSpec(full), synced()},
			want:   want{exists: true, updated: true, labels: cpB, size: "small", written: true, events: []event.Reason{ReasonUpdated}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			explicitName("shared")(mg)
			for _, m := range tc.mods {
				m(mg)
			}
			owner := ownership.Marker(mg)
			s := fullSeed(ownerPlaceholder)
			s.labels = merged(s.labels, tc.labels)
			before := s.create(t, api, "shared", owner)
			rec := &fakes.Recorder{}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: rec, metrics: metrics.New(), kind: "Widget", cp: "b", now: func() time.Time { return now }}

			o, err := e.Observe(t.Context(), mg)
			if (err != nil) != tc.want.err {
				t.Fatalf("%s\nObserve(...): want error %t, got %v", tc.reason, tc.want.err, err)
			}
			for _, f := range tc.want.mentions {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s\nObserve(...) error %q does not mention %q", tc.reason, err, f)
				}
			}
			if o.ResourceExists != tc.want.exists {
				t.Errorf("%s\nObserve(...): want exists %t, got %t", tc.reason, tc.want.exists, o.ResourceExists)
			}
			if updated := o.ResourceExists && !o.ResourceUpToDate && !observeOnly(mg); updated != tc.want.updated {
				t.Fatalf("%s\nObserve(...): want an update %t, got %t (diff %q)", tc.reason, tc.want.updated, updated, o.Diff)
			}
			if tc.want.updated {
				if _, err := e.Update(t.Context(), mg); err != nil {
					t.Fatalf("%s\nUpdate(...): %v", tc.reason, err)
				}
			}

			after, err := api.GetWidget(t.Context(), "shared")
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := merged(fillLabels(fullSeed(ownerPlaceholder).labels, owner), markersOf(owner))
			for k, v := range tc.want.labels {
				wantLabels[k] = strings.ReplaceAll(v, "{now}", strconv.FormatInt(now.Unix(), 10))
			}
			if diff := cmp.Diff(wantLabels, after.Labels); diff != "" {
				t.Errorf("%s\nwidget labels afterwards: -want, +got:\n%s", tc.reason, diff)
			}
			if after.Size != tc.want.size {
				t.Errorf("%s\nwidget size afterwards: want %s, got %s", tc.reason, tc.want.size, after.Size)
			}
			if got := after.Generation != before.Generation; got != tc.want.written {
				t.Errorf("%s\nwidget written: want %t, got %t (generation %d -> %d)", tc.reason, tc.want.written, got, before.Generation, after.Generation)
			}
			if after.State == widgetapi.StateDeleting {
				t.Errorf("%s\nthe widget is being deleted", tc.reason)
			}
			got := mg.GetCondition(TypeControlPlane)
			if tc.want.condition == nil && got.Status != corev1.ConditionUnknown {
				t.Errorf("%s\nwant no ControlPlane condition, got %+v", tc.reason, got)
			}
			if c := tc.want.condition; c != nil && (got.Status != c.Status || got.Reason != c.Reason) {
				t.Errorf("%s\nControlPlane condition: want %s %s, got %s %s (%s)", tc.reason, c.Status, c.Reason, got.Status, got.Reason, got.Message)
			}
			var reasons []event.Reason
			for _, ev := range rec.Events() {
				reasons = append(reasons, ev.Reason)
			}
			if diff := cmp.Diff(tc.want.events, reasons); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReleaseLeavesOtherControlPlanes: deleting a resource that keeps its
// widget (deletionPolicy Orphan) releases nothing of a widget that another
// control plane's resource with the same marker manages.
func TestReleaseLeavesOtherControlPlanes(t *testing.T) {
	env := apitest.Start(t)
	api := env.Client(t, apitest.TokenA)
	mg := newNamespaced()
	explicitName("shared")(mg)
	deleted()(mg)
	owner := ownership.Marker(mg)
	s := fullSeed(ownerPlaceholder)
	s.labels[ownership.ControlPlaneLabel] = "a"
	before := s.create(t, api, "shared", owner)
	e := &external[*nsv1beta1.Widget]{api: env.Client(t, apitest.TokenA), record: &fakes.Recorder{}, metrics: metrics.New(), kind: "Widget", cp: "b"}
	if err := e.release(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
	after, err := api.GetWidget(t.Context(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || !maps.Equal(after.Labels, before.Labels) {
		t.Errorf("release by control plane b wrote control plane a's widget: labels %v -> %v, generation %d -> %d", before.Labels, after.Labels, before.Generation, after.Generation)
	}
}

// takeOverFrom annotates the resource to take its widget over from cp.
func takeOverFrom(cp string) mod {
	return func(mg commonv1beta1.WidgetResource) {
		meta.AddAnnotations(mg, map[string]string{ownership.TakeOverAnnotation: cp})
	}
}

// contested leaves the ControlPlane condition of a reported contest.
func contested() mod {
	return func(mg commonv1beta1.WidgetResource) {
		mg.SetConditions(controlPlaneCondition(corev1.ConditionFalse, ReasonContested, "earlier contest"))
	}
}

// merged returns a copy of a with b's labels set over it.
func merged(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}
