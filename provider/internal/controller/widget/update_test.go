package widget

import (
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestUpdate(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testUpdate(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testUpdate(t, newCluster) })
}

// testUpdate observes a widget, as the reconciler does before every update,
// then updates it.
func testUpdate[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
	type widget struct {
		Size, Region, Description string
		Labels                    map[string]string
	}
	type want struct {
		err      error
		mentions []string
		checked  func(error) bool
		// widget is the widget in the API afterwards.
		widget widget
		// untouched says the update must not have changed the widget.
		untouched bool
		events    []event.Event
		// updates are the updates counted in the metrics, by cause; a cause
		// not listed counts none.
		updates map[string]float64
		ready   xpv2.Condition
		// details are the change log entry's additional details.
		details managed.AdditionalDetails
		// drift is status.drift afterwards.
		drift *commonv1beta1.DriftRepairs
	}
	now := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	large := with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") })
	resizing := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonResizing, Message: "The Widget API is resizing the widget to large"}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		seed    *seed
		mods    []mod
		knownID bool
		// between runs after Observe and before Update: a concurrent change.
		between func(t *testing.T, api *widgetapi.Client, name string)
		// exhaust uses up the update's rate limit before it runs.
		exhaust bool
		want    want
	}{
		"DriftRepaired": {
			reason: "A widget changed behind our back is restored, with an event saying what changed, a drift metric and a record in status.drift.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(large), synced()},
			want: want{
				widget:  widget{Size: "large", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: size: want "large", have "small"`)},
				updates: map[string]float64{"drift": 1},
				details: managed.AdditionalDetails{"cause": "drift", "diff": `size: want "large", have "small"`},
				ready:   resizing,
				drift:   &commonv1beta1.DriftRepairs{Count: 1, LastAt: metav1.NewTime(now), LastChange: `size: want "large", have "small"`},
			},
		},
		"DriftRepairedAgain": {
			reason: "Each repair counts: the record's count grows and it says when and what the last repair restored.",
			seed:   fullSeed(ownerPlaceholder),
			mods: []mod{defaultName(), withSpec(large), synced(), func(mg commonv1beta1.WidgetResource) {
				mg.SetDriftRepairs(&commonv1beta1.DriftRepairs{Count: 4, LastAt: metav1.NewTime(now.Add(-time.Hour)), LastChange: "description: want \"a\", have \"b\""})
			}},
			want: want{
				widget:  widget{Size: "large", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: size: want "large", have "small"`)},
				updates: map[string]float64{"drift": 1},
				details: managed.AdditionalDetails{"cause": "drift", "diff": `size: want "large", have "small"`},
				ready:   resizing,
				drift:   &commonv1beta1.DriftRepairs{Count: 5, LastAt: metav1.NewTime(now), LastChange: `size: want "large", have "small"`},
			},
		},
		"SpecChanged": {
			reason: "A spec the user changed since the last sync is applied, reported as an update, not drift.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(large), syncedEarlier()},
			want: want{
				widget:  widget{Size: "large", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonUpdated, `Updated widget to match the spec: size: want "large", have "small"`)},
				updates: map[string]float64{"spec": 1},
				details: managed.AdditionalDetails{"cause": "spec", "diff": `size: want "large", have "small"`},
				ready:   resizing,
			},
		},
		"NeverSynced": {
			reason: "A resource that never synced is applying its spec.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.description = "old" }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				widget:  widget{Size: "small", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonUpdated, `Updated widget to match the spec: description: want "web tier", have "old"`)},
				updates: map[string]float64{"spec": 1},
				details: managed.AdditionalDetails{"cause": "spec", "diff": `description: want "web tier", have "old"`},
				ready:   xpv2.Available(),
			},
		},
		"Adopt": {
			reason: "Adopting an unowned widget named explicitly adds our marker, keeps its settings, and says so.",
			seed:   withSeed(fullSeed(""), func(s *seed) { s.labels = map[string]string{"team": "a", "env": "prod"} }),
			mods:   []mod{explicitName("imported")},
			want: want{
				widget:  widget{Size: "small", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", "env": "prod", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonAdopted, "Adopted widget imported; it is now managed by this resource")},
				updates: map[string]float64{"adopt": 1},
				details: managed.AdditionalDetails{"cause": "adopt", "diff": "ownership labels: want {markers}, have {}"},
				ready:   xpv2.Available(),
			},
		},
		"OwnerLabelRestored": {
			reason:  "A widget we recorded whose marker was removed gets it back as a drift repair, not an adoption.",
			seed:    fullSeed(""),
			mods:    []mod{defaultName(), withSpec(full), synced()},
			knownID: true,
			want: want{
				widget:  widget{Size: "small", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: ownership labels: want {markers}, have {}`)},
				updates: map[string]float64{"drift": 1},
				details: managed.AdditionalDetails{"cause": "drift", "diff": "ownership labels: want {markers}, have {}"},
				ready:   xpv2.Available(),
				drift:   &commonv1beta1.DriftRepairs{Count: 1, LastAt: metav1.NewTime(now), LastChange: "ownership labels: want {markers}, have {}"},
			},
		},
		"UnspecifiedLabelsKept": {
			reason: "Without labels in the spec the widget's labels, reserved ones included, survive an update.",
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.labels = map[string]string{commonv1beta1.OwnershipLabelPrefix + "tier": "gold"}
			}),
			mods: []mod{defaultName(), withSpec(commonv1beta1.WidgetParameters{Size: ptr.To("large")}), synced()},
			want: want{
				widget:  widget{Size: "large", Region: "us-east-1", Description: "web tier", Labels: map[string]string{commonv1beta1.OwnershipLabelPrefix + "tier": "gold", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: size: want "large", have "small"`)},
				updates: map[string]float64{"drift": 1},
				details: managed.AdditionalDetails{"cause": "drift", "diff": `size: want "large", have "small"`},
				ready:   resizing,
				drift:   &commonv1beta1.DriftRepairs{Count: 1, LastAt: metav1.NewTime(now), LastChange: `size: want "large", have "small"`},
			},
		},
		"InitProviderNotApplied": {
			reason: "Update applies spec.forProvider only: spec.initProvider's region, size, labels and description were for the creation, and neither change the widget nor appear in the event.",
			seed:   fullSeed(ownerPlaceholder),
			mods: []mod{defaultName(), withSpec(large), syncedEarlier(), withInit(commonv1beta1.WidgetInitParameters{
				Region: ptr.To("eu-west-1"), Size: ptr.To("medium"), Labels: map[string]string{"env": "prod"}, Description: ptr.To("first"),
			})},
			want: want{
				widget:  widget{Size: "large", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				events:  []event.Event{event.Normal(ReasonUpdated, `Updated widget to match the spec: size: want "large", have "small"`)},
				updates: map[string]float64{"spec": 1},
				details: managed.AdditionalDetails{"cause": "spec", "diff": `size: want "large", have "small"`},
				ready:   resizing,
			},
		},
		"ConcurrentChange": {
			reason: "A widget changed since it was observed is not overwritten blindly: the update fails (412) and the change survives.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(large)},
			between: func(t *testing.T, api *widgetapi.Client, name string) {
				t.Helper()
				if _, err := api.PatchWidget(t.Context(), name, widgetapi.PatchWidgetRequest{Description: ptr.To("someone else")}); err != nil {
					t.Fatal(err)
				}
			},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"changed while it was being updated"},
				widget:    widget{Size: "small", Region: "us-east-1", Description: "someone else", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Available(),
			},
		},
		"DeletedMeanwhile": {
			reason:  "An API error (here: the widget is being deleted) goes through Check and is returned.",
			server:  func(o *server.Options) { o.DeleteDelay = time.Hour },
			seed:    fullSeed(ownerPlaceholder),
			mods:    []mod{defaultName(), withSpec(large)},
			between: deleteWidget,
			want: want{
				err: cmpopts.AnyError, checked: widgetapi.IsConflict,
				widget:    widget{Size: "small", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Available(),
			},
		},
		"RateLimited": {
			reason:  "A 429 goes through Check (which throttles) and is returned; the widget is not touched.",
			server:  func(o *server.Options) { apitest.RateLimited(o); o.ProvisionDelay = time.Hour },
			seed:    withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.state = widgetapi.StateProvisioning }),
			mods:    []mod{defaultName(), withSpec(large)},
			exhaust: true,
			want: want{
				err: cmpopts.AnyError, checked: isRateLimited,
				widget:    widget{Size: "small", Region: "us-east-1", Description: "web tier", Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Creating(),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.ResizeDelay = time.Hour
				o.Tokens = map[string]string{apitest.TokenA: apitest.ProjectA, "seed-token": apitest.ProjectA}
			}), apitest.WithOptions(tc.server))
			// The test sets up and inspects the widget with its own token
			// of the same project, so a rate limit hits only the calls
			// under test.
			seedAPI, api := env.Client(t, "seed-token"), env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			owner := ownership.Marker(mg)
			name := meta.GetExternalName(mg)
			seeded := tc.seed.create(t, seedAPI, name, owner)
			if tc.knownID {
				mg.SetWidgetObservation(commonv1beta1.WidgetObservation{ID: seeded.ID})
			}
			rec := &fakes.Recorder{}
			met := metrics.New()
			// One external client observes, then updates, as in a reconcile.
			e := &external[T]{api: api, record: rec, metrics: met, kind: "Widget", now: func() time.Time { return now }}
			if _, err := e.Observe(t.Context(), mg); err != nil {
				t.Fatalf("%s\nObserve(...) before Update: %v", tc.reason, err)
			}
			if tc.between != nil {
				tc.between(t, seedAPI, name)
			}
			before, err := seedAPI.GetWidget(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if tc.exhaust {
				apitest.Exhaust(t, api)
			}

			got, err := e.Update(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nUpdate(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			mentions(t, tc.reason, err, tc.want.mentions, owner)
			apiError(t, tc.reason, err, tc.want.checked)
			wantUpdate := managed.ExternalUpdate{}
			if tc.want.details != nil {
				wantUpdate.AdditionalDetails = managed.AdditionalDetails{}
				for k, v := range tc.want.details {
					wantUpdate.AdditionalDetails[k] = fill(v, owner)
				}
			}
			if diff := cmp.Diff(wantUpdate, got); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}

			after, err := seedAPI.GetWidget(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			wantWidget := tc.want.widget
			wantWidget.Labels = fillLabels(wantWidget.Labels, owner)
			if diff := cmp.Diff(wantWidget, widget{Size: after.Size, Region: after.Region, Description: after.Description, Labels: after.Labels}); diff != "" {
				t.Errorf("%s\nwidget in the API: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.untouched && after.Generation != before.Generation {
				t.Errorf("%s\nwidget generation went from %d to %d; want the widget untouched", tc.reason, before.Generation, after.Generation)
			}
			if !tc.want.untouched {
				if diff := cmp.Diff(observation(after), *mg.GetWidgetObservation()); diff != "" {
					t.Errorf("%s\nstatus.atProvider after Update: -want, +got:\n%s", tc.reason, diff)
				}
			}
			wantEvents := make([]event.Event, 0, len(tc.want.events))
			for _, ev := range tc.want.events {
				ev.Message = fill(ev.Message, owner)
				wantEvents = append(wantEvents, ev)
			}
			if diff := cmp.Diff(wantEvents, rec.Events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			updates := map[string]float64{}
			for _, cause := range []string{"drift", "spec", "adopt"} {
				if n := counter(t, met.Updates.WithLabelValues("Widget", cause)); n != 0 {
					updates[cause] = n
				}
			}
			if diff := cmp.Diff(tc.want.updates, updates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nupdates counted, by cause: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.drift != nil {
				tc.want.drift.LastChange = fill(tc.want.drift.LastChange, owner)
			}
			if diff := cmp.Diff(tc.want.drift, mg.GetDriftRepairs()); diff != "" {
				t.Errorf("%s\nstatus.drift: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
