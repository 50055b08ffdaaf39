package widget

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// alpha and bravo are two 55-character namespaces that share their first 50
// characters (finding M4 of issue 42). Their resources' markers are
// shortened, and provider versions before 128-bit markers shortened them to
// the same 52-character head and a 40-bit hash.
const (
	alpha = "team-payments-europe-west-production-cluster-00001alpha"
	bravo = "team-payments-europe-west-production-cluster-00001bravo"

	// alphaWeb is the marker of alpha/web-frontend; alphaWebLegacy the one
	// older versions gave it.
	alphaWeb       = "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli"
	alphaWebLegacy = "n_team-payments-europe-west-production-cluster-00001-dde77bbf34"
	// bravoProbeLegacy is the legacy marker of bravo/probe-000001: it
	// stands for the name a search of 2^40 names of bravo finds whose
	// legacy marker equals that of a widget of alpha.
	bravoProbeLegacy = "n_team-payments-europe-west-production-cluster-00001-b89f23b543"
)

func nsWidget(ns, name string) *nsv1beta1.Widget {
	return &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1}}
}

// TestOwnershipMarkers checks that only the namespace and resource a
// widget's markers name manage it, and that a widget marked by an older
// provider keeps its owner and gets the current markers.
func TestOwnershipMarkers(t *testing.T) {
	type want struct {
		err bool
		// hides are facts about the owner the error must not state.
		hides []string
		// review is the UpToDate reason an Observe-only import gets.
		review xpv2.ConditionReason
		o      managed.ExternalObservation
		// labels are the widget's after Update, when Observe found it
		// not up to date.
		labels map[string]string
		events []string
	}
	cases := map[string]struct {
		reason string
		mg     *nsv1beta1.Widget
		labels map[string]string
		mods   []mod
		want   want
	}{
		"CollidingMarker": {
			reason: "A resource of bravo whose marker equals the one on alpha's widget is refused: the widget's namespace is alpha, and nothing of it is read.",
			mg:     nsWidget(bravo, "probe-000001"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: bravoProbeLegacy, ownership.NamespaceLabel: alpha},
			mods:   []mod{explicitName("victim"), withSpec(commonv1beta1.WidgetParameters{Size: ptr.To("large")})},
			want:   want{err: true, hides: []string{alpha}},
		},
		"CollidingMarkerReview": {
			reason: "An Observe-only import by that resource is refused as out of reach.",
			mg:     nsWidget(bravo, "probe-000001"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: bravoProbeLegacy, ownership.NamespaceLabel: alpha},
			mods:   []mod{explicitName("victim"), observeOnlyPolicy()},
			want:   want{err: true, hides: []string{alpha}, review: ReasonOutOfReach},
		},
		"ForgedNamespace": {
			reason: "A widget carrying the resource's own marker under another namespace's label is not the resource's.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: "n_team-a.web", ownership.NamespaceLabel: "team-b"},
			mods:   []mod{explicitName("victim"), withSpec(commonv1beta1.WidgetParameters{Size: ptr.To("large")})},
			want:   want{err: true, hides: []string{"team-b"}},
		},
		"AnotherNamespacesLegacyMarker": {
			reason: "A widget with an old-format marker of another namespace's resource stays refused.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: alphaWebLegacy, ownership.NamespaceLabel: alpha},
			mods:   []mod{explicitName("victim")},
			want:   want{err: true, hides: []string{alpha}},
		},
		"SiblingsLegacyMarker": {
			reason: "A widget with an old-format marker of another resource of the same namespace stays that resource's.",
			mg:     nsWidget(alpha, "other"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: alphaWebLegacy, ownership.NamespaceLabel: alpha},
			mods:   []mod{explicitName("victim")},
			want:   want{err: true},
		},
		"OwnLegacyMarker": {
			reason: "A widget with the resource's own old-format marker is its own, not adopted: Update rewrites the marker and changes nothing else.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: alphaWebLegacy, ownership.NamespaceLabel: alpha},
			mods:   []mod{explicitName("mine"), withSpec(full)},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true,
					Diff: "ownership labels: want {widgetco.io/owner=" + alphaWeb + ", widgetco.io/owner-namespace=" + alpha + "}, have {widgetco.io/owner=" + alphaWebLegacy + ", widgetco.io/owner-namespace=" + alpha + "}"},
				labels: map[string]string{"team": "a", ownership.OwnerLabel: alphaWeb, ownership.NamespaceLabel: alpha},
				events: []string{string(ReasonUpdated)},
			},
		},
		"OwnCurrentMarker": {
			reason: "A widget with the resource's current markers is up to date.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{"team": "a", ownership.OwnerLabel: alphaWeb, ownership.NamespaceLabel: alpha},
			mods:   []mod{explicitName("mine"), withSpec(full)},
			want:   want{o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			api := env.Client(t, apitest.TokenA)
			mg := tc.mg
			for _, m := range tc.mods {
				m(mg)
			}
			ext := mg.GetAnnotations()["crossplane.io/external-name"]
			(&seed{size: "small", labels: tc.labels, description: "web tier", state: widgetapi.StateReady}).create(t, api, ext, "")
			rec := &fakes.Recorder{}
			e := &external[*nsv1beta1.Widget]{api: api, record: rec, metrics: metrics.New(), kind: "Widget"}

			o, err := e.Observe(t.Context(), mg)
			if (err != nil) != tc.want.err {
				t.Fatalf("%s\nObserve(...): want error %t, got %v", tc.reason, tc.want.err, err)
			}
			for _, f := range tc.want.hides {
				if strings.Contains(err.Error(), f) {
					t.Errorf("%s\nObserve(...): error %q reveals %q", tc.reason, err, f)
				}
			}
			if diff := cmp.Diff(tc.want.o, o, cmpIgnoreConnection); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if got := mg.GetCondition(TypeUpToDate).Reason; tc.want.review != "" && got != tc.want.review {
				t.Errorf("%s\nUpToDate reason: want %q, got %q", tc.reason, tc.want.review, got)
			}
			if tc.want.err && mg.GetWidgetObservation().ID != "" {
				t.Errorf("%s\nstatus.atProvider shows a refused widget: %+v", tc.reason, *mg.GetWidgetObservation())
			}
			if tc.want.err || o.ResourceUpToDate {
				return
			}
			if e.adopting {
				t.Errorf("%s\nObserve(...) reports an adoption of the resource's own widget", tc.reason)
			}
			if _, err := e.Update(t.Context(), mg); err != nil {
				t.Fatalf("%s\nUpdate(...): %v", tc.reason, err)
			}
			after, err := api.GetWidget(t.Context(), ext)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.labels, after.Labels); diff != "" {
				t.Errorf("%s\nwidget labels after Update: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.events, reasonsOf(rec.Events())); diff != "" {
				t.Errorf("%s\nevent reasons: -want, +got:\n%s", tc.reason, diff)
			}
			// The next reconcile finds the widget its own and up to date.
			again := &external[*nsv1beta1.Widget]{api: api, record: rec, metrics: metrics.New(), kind: "Widget"}
			if o, err := again.Observe(t.Context(), mg); err != nil || !o.ResourceUpToDate {
				t.Errorf("%s\nObserve(...) after the rewrite: want up to date, got %+v, %v", tc.reason, o, err)
			}
		})
	}
}

// cmpIgnoreConnection leaves the endpoint, which the server chooses, out of
// a comparison of observations.
var cmpIgnoreConnection = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".ConnectionDetails" }, cmp.Ignore())

func reasonsOf(events []event.Event) []string {
	if len(events) == 0 {
		return nil
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, string(e.Reason))
	}
	return out
}
