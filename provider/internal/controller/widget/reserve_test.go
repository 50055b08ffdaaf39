package widget

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestReleasedWidgetIsReserved releases a widget, as deleting its Widget
// with onDelete: KeepWidget or deletionPolicy Orphan does, and then tries to
// adopt or review it from another resource (finding L4 of issue 42): only
// the namespace that released it, and cluster-scoped resources, may.
func TestReleasedWidgetIsReserved(t *testing.T) {
	type want struct {
		// refused: Observe returns an error and reads nothing of the
		// widget into the resource.
		refused bool
		// review is the UpToDate condition an Observe-only import gets.
		review *xpv2.Condition
		// exists is what Observe reports; when it is set the test also
		// updates the widget, which must then carry only the adopter's
		// markers.
		exists bool
		events []string
	}
	reserved := &xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonReserved,
		Message: "Widget kept was released by a resource outside namespace team-b and is reserved for the namespace that released it: it can be neither reviewed nor taken over from here. The platform team can clear the reservation by removing the label widgetco.io/released-by from the widget in the Widget API."}
	cases := map[string]struct {
		reason string
		// releaser is the resource that releases the widget: team-a/web
		// unless set.
		releaser commonv1beta1.WidgetResource
		adopter  commonv1beta1.WidgetResource
		mods     []mod
		// forgeID writes the widget's ID into the adopter's status, as
		// anyone with Crossplane's edit role may.
		forgeID bool
		// cleared removes the reservation, as the platform team does.
		cleared bool
		want    want
	}{
		"OtherNamespaceAdopts": {
			reason:  "Another namespace's Widget that names the released widget is refused, without naming the namespace that released it.",
			adopter: newNS("team-b", "web"),
			mods:    []mod{explicitName("kept")},
			want:    want{refused: true, events: []string{string(ReasonReserved)}},
		},
		"OtherNamespaceReviews": {
			reason:  "Another namespace's Observe-only import is refused too, and shows none of the widget's values.",
			adopter: newNS("team-b", "web"),
			mods:    []mod{explicitName("kept"), observeOnlyPolicy()},
			want:    want{refused: true, review: reserved, events: []string{string(ReasonReserved)}},
		},
		"OtherNamespaceForgesStatus": {
			reason:  "A widget ID written into the status does not make the released widget another namespace's.",
			adopter: newNS("team-b", "web"),
			mods:    []mod{explicitName("kept")},
			forgeID: true,
			want:    want{refused: true, events: []string{string(ReasonReserved)}},
		},
		"OtherNamespaceDeletes": {
			reason:  "Deleting another namespace's Widget with a forged status leaves the released widget alone: it is reported gone.",
			adopter: newNS("team-b", "web"),
			mods:    []mod{explicitName("kept"), deleted()},
			forgeID: true,
		},
		"ClusterReleasedNamespaceAdopts": {
			reason:   "A widget a cluster-scoped resource released is reserved against every namespace.",
			releaser: newCluster(),
			adopter:  newNS("team-a", "web"),
			mods:     []mod{explicitName("kept")},
			want:     want{refused: true, events: []string{string(ReasonReserved)}},
		},
		"SameNamespaceAdopts": {
			reason:  "A Widget of the namespace that released the widget adopts it, and the reservation goes.",
			adopter: newNS("team-a", "web-2"),
			mods:    []mod{explicitName("kept")},
			want:    want{exists: true, events: []string{string(ReasonAdopted)}},
		},
		"PlatformAdopts": {
			reason:  "A cluster-scoped Widget (the platform's) adopts any released widget.",
			adopter: newCluster(),
			mods:    []mod{explicitName("kept")},
			want:    want{exists: true, events: []string{string(ReasonAdopted)}},
		},
		"ClearedByPlatform": {
			reason:  "Once the platform team removes the reservation, any namespace may adopt the widget.",
			adopter: newNS("team-b", "web"),
			mods:    []mod{explicitName("kept")},
			cleared: true,
			want:    want{exists: true, events: []string{string(ReasonAdopted)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			api := env.Client(t, apitest.TokenA)
			releaser := tc.releaser
			if releaser == nil {
				releaser = newNS("team-a", "web")
			}
			explicitName("kept")(releaser)
			deleted()(releaser)
			fullSeed(ownerPlaceholder).create(t, api, "kept", ownership.Marker(releaser))
			rel := &external[commonv1beta1.WidgetResource]{api: api, record: &fakes.Recorder{}, metrics: metrics.New(), kind: "Widget"}
			if err := rel.release(t.Context(), releaser); err != nil {
				t.Fatalf("release(...): %v", err)
			}
			released, err := api.GetWidget(t.Context(), "kept")
			if err != nil {
				t.Fatal(err)
			}
			if tc.cleared {
				labels := ownership.Without(released.Labels)
				if _, err := api.ReplaceWidget(t.Context(), "kept", widgetapi.ReplaceWidgetRequest{Size: released.Size, Labels: labels, Description: released.Description}); err != nil {
					t.Fatal(err)
				}
			}

			mg := tc.adopter
			for _, m := range tc.mods {
				m(mg)
			}
			if tc.forgeID {
				mg.SetWidgetObservation(commonv1beta1.WidgetObservation{ID: released.ID})
			}
			rec := &fakes.Recorder{}
			e := &external[commonv1beta1.WidgetResource]{api: api, record: rec, metrics: metrics.New(), kind: "Widget"}
			o, err := e.Observe(t.Context(), mg)
			if (err != nil) != tc.want.refused {
				t.Fatalf("%s\nObserve(...): want error %t, got %v", tc.reason, tc.want.refused, err)
			}
			if o.ResourceExists != tc.want.exists {
				t.Errorf("%s\nObserve(...).ResourceExists: want %t, got %t", tc.reason, tc.want.exists, o.ResourceExists)
			}
			if err != nil {
				for _, f := range []string{"outside namespace " + mg.GetNamespace(), "reserved for the namespace that released it", "platform team", ownership.ReleasedByLabel} {
					if !strings.Contains(err.Error(), f) {
						t.Errorf("%s\nObserve(...): error %q does not say %q", tc.reason, err, f)
					}
				}
				if r := releaser.GetNamespace(); r != "" && strings.Contains(err.Error(), r) {
					t.Errorf("%s\nObserve(...): error %q reveals the releasing namespace %q", tc.reason, err, r)
				}
			}
			if tc.want.review != nil {
				if diff := cmp.Diff(*tc.want.review, mg.GetCondition(TypeUpToDate), ignoreTransitionTime); diff != "" {
					t.Errorf("%s\nUpToDate condition: -want, +got:\n%s", tc.reason, diff)
				}
			}
			if !tc.want.exists {
				if got := *mg.GetWidgetObservation(); got.Labels != nil || got.Size != "" || got.Description != "" {
					t.Errorf("%s\nstatus.atProvider shows the refused widget: %+v", tc.reason, got)
				}
				if p := mg.GetWidgetParameters(); p.Size != nil || p.Labels != nil || p.Description != nil {
					t.Errorf("%s\nspec.forProvider was late-initialized from the refused widget: %+v", tc.reason, *p)
				}
			}
			if tc.want.exists {
				if _, err := e.Update(t.Context(), mg); err != nil {
					t.Fatalf("%s\nUpdate(...): %v", tc.reason, err)
				}
				after, err := api.GetWidget(t.Context(), "kept")
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"team": "a"}
				for k, v := range ownership.Labels(mg, "") {
					want[k] = v
				}
				if diff := cmp.Diff(want, after.Labels); diff != "" {
					t.Errorf("%s\nwidget labels after adoption: -want, +got:\n%s", tc.reason, diff)
				}
			}
			if diff := cmp.Diff(tc.want.events, reasonsOf(rec.Events())); diff != "" {
				t.Errorf("%s\nevent reasons: -want, +got:\n%s", tc.reason, diff)
			}
			if meta.WasDeleted(mg) && o.ResourceExists {
				t.Errorf("%s\na deleted resource would delete the released widget", tc.reason)
			}
		})
	}
}

func newNS(ns, name string) commonv1beta1.WidgetResource {
	return nsWidget(ns, name)
}
