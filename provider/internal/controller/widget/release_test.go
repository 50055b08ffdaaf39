package widget

import (
	"context"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/google/go-cmp/cmp"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// racingAPI runs between once after its first GetWidget: another resource
// acting between release's read and its write.
type racingAPI struct {
	API
	between func(ctx context.Context)
}

func (a *racingAPI) GetWidget(ctx context.Context, name string) (*widgetapi.Widget, error) {
	w, err := a.API.GetWidget(ctx, name)
	if a.between != nil {
		a.between(ctx)
		a.between = nil
	}
	return w, err
}

func TestRelease(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testRelease(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testRelease(t, newCluster) })
}

func testRelease[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
	type want struct {
		err bool
		// labels are the widget's afterwards (ownerPlaceholder: the
		// resource under test's marker).
		labels map[string]string
		// written says the widget's generation moved.
		written bool
		events  []event.Event
	}
	cases := map[string]struct {
		reason string
		seed   *seed
		// race, when set, runs between release's read and its write.
		race func(t *testing.T, api *widgetapi.Client, name string)
		want want
	}{
		"Owned": {
			reason: "An orphaned resource replaces its ownership marker with a reservation for its scope, and changes nothing else: user labels, size and description stay.",
			seed:   fullSeed(ownerPlaceholder),
			want: want{labels: map[string]string{"team": "a", ownership.ReleasedByLabel: "{released-by}"}, written: true,
				events: []event.Event{event.Normal(ReasonReleased, "Left widget {name} in the Widget API and removed its ownership marker: {scope} may now adopt it (label widgetco.io/released-by reserves it for them)")}},
		},
		"ForgedNamespace": {
			reason: "A widget with this resource's marker under another namespace's label is not this resource's to release.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.labels[ownership.NamespaceLabel] = "team-b" }),
			want:   want{labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder, ownership.NamespaceLabel: "team-b"}},
		},
		"AnotherOwner": {
			reason: "A widget another resource manages keeps that resource's marker: a resource releases only what it owns.",
			seed:   fullSeed("n_team-a.other"),
			want:   want{labels: map[string]string{"team": "a", ownership.OwnerLabel: "n_team-a.other"}},
		},
		"Unowned": {
			reason: "An unowned widget (imported, never taken over) is not written at all.",
			seed:   fullSeed(""),
			want:   want{labels: map[string]string{"team": "a"}},
		},
		"Missing": {
			reason: "A widget that is gone needs no release.",
		},
		"AdoptedMeanwhile": {
			reason: "A resource that adopts the widget between release's read and its write keeps its marker: the conditional write fails, and release says it reads again.",
			seed:   fullSeed(ownerPlaceholder),
			race: func(t *testing.T, api *widgetapi.Client, name string) {
				w, err := api.GetWidget(t.Context(), name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := api.ReplaceWidget(t.Context(), name, widgetapi.ReplaceWidgetRequest{Size: w.Size, Description: w.Description,
					Labels: map[string]string{"team": "a", ownership.OwnerLabel: "n_team-a.racer"}}); err != nil {
					t.Fatal(err)
				}
			},
			want: want{err: true, written: true, labels: map[string]string{"team": "a", ownership.OwnerLabel: "n_team-a.racer"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			explicitName("kept")(mg)
			deleted()(mg)
			owner := ownership.Marker(mg)
			var before *widgetapi.Widget
			if tc.seed != nil {
				before = tc.seed.create(t, api, "kept", owner)
			}
			var a API = env.Client(t, apitest.TokenA)
			if tc.race != nil {
				a = &racingAPI{API: a, between: func(context.Context) { tc.race(t, api, "kept") }}
			}
			rec := &fakes.Recorder{}
			e := &external[T]{api: a, record: rec, metrics: metrics.New(), kind: "Widget"}

			err := e.release(t.Context(), mg)
			if (err != nil) != tc.want.err {
				t.Fatalf("%s\nrelease(...): want error %t, got %v", tc.reason, tc.want.err, err)
			}
			for i := range tc.want.events {
				tc.want.events[i].Message = fillScope(fill(replaceName(tc.want.events[i].Message, meta.GetExternalName(mg)), owner), mg)
			}
			if diff := cmp.Diff(tc.want.events, rec.Events()); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			if before == nil {
				return
			}
			after, err := api.GetWidget(t.Context(), "kept")
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := fillLabels(tc.want.labels, owner)
			if _, ok := wantLabels[ownership.ReleasedByLabel]; ok {
				wantLabels[ownership.ReleasedByLabel] = releasedBy(mg)
			}
			if diff := cmp.Diff(wantLabels, after.Labels); diff != "" {
				t.Errorf("%s\nwidget labels afterwards: -want, +got:\n%s", tc.reason, diff)
			}
			if got := after.Generation != before.Generation; got != tc.want.written {
				t.Errorf("%s\nwidget written: want %t, got %t (generation %d -> %d)", tc.reason, tc.want.written, got, before.Generation, after.Generation)
			}
			if after.Size != before.Size || after.Description != before.Description || after.State == widgetapi.StateDeleting {
				t.Errorf("%s\nrelease changed more than the marker: %+v -> %+v", tc.reason, before, after)
			}
			if tc.race == nil {
				return
			}
			// The retry reads the new owner and leaves it alone.
			if err := e.release(t.Context(), mg); err != nil {
				t.Errorf("%s\nrelease(...) again: %v", tc.reason, err)
			}
			again, _ := api.GetWidget(t.Context(), "kept")
			if diff := cmp.Diff(after.Labels, again.Labels); diff != "" {
				t.Errorf("%s\nthe retry changed the new owner's widget: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func replaceName(s, name string) string {
	return strings.ReplaceAll(s, "{name}", name)
}

// releasedBy is the reservation the resource under test leaves on the
// widget it releases.
func releasedBy(mg commonv1beta1.WidgetResource) string {
	if mg.GetNamespace() != "" {
		return mg.GetNamespace()
	}
	return "_cluster-scoped"
}

// fillScope replaces {scope} with who may adopt what mg released.
func fillScope(s string, mg commonv1beta1.WidgetResource) string {
	scope := "cluster-scoped resources"
	if ns := mg.GetNamespace(); ns != "" {
		scope = "resources of namespace " + ns + " and cluster-scoped resources"
	}
	return strings.ReplaceAll(s, "{scope}", scope)
}
