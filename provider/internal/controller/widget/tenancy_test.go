package widget

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/google/go-cmp/cmp"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestTenancy tries, as a tenant in namespace team-a would, to manage or
// observe widgets that are not its namespace's, and checks that nothing of
// them reaches the resource's status or error.
func TestTenancy(t *testing.T) {
	type want struct {
		err      bool
		mentions []string
		// hides are facts about the other tenant the error must not state.
		hides  []string
		exists bool
		// status says status.atProvider shows the widget.
		status bool
	}
	cases := map[string]struct {
		reason  string
		cluster bool
		labels  map[string]string
		mods    []mod
		// stale fills status.atProvider as an earlier provider version,
		// which allowed the import, left it.
		stale bool
		want  want
	}{
		"ObserveAnotherNamespacesWidget": {
			reason: "An Observe-only import of team-b's widget is refused; its labels, description and ID stay out of team-a's status, and the error does not say who owns it.",
			labels: map[string]string{ownership.OwnerLabel: "n_team-b.web", "secret-project": "x"},
			mods:   []mod{explicitName("victim"), observeOnlyPolicy()},
			want: want{err: true, mentions: []string{"victim", "outside namespace team-a", "ProviderConfig"},
				hides: []string{"team-b", "secret-project"}},
		},
		"ObserveClearsStaleStatus": {
			reason: "What an earlier, unconfined provider copied into status is cleared once the import is refused.",
			labels: map[string]string{ownership.OwnerLabel: "n_team-b.web"},
			mods:   []mod{explicitName("victim"), observeOnlyPolicy()},
			stale:  true,
			want:   want{err: true},
		},
		"ObserveClusterScopedResourcesWidget": {
			reason: "A widget a cluster-scoped resource (a legacy claim's) manages is another tenant's too.",
			labels: map[string]string{ownership.OwnerLabel: "c_web"},
			mods:   []mod{explicitName("victim"), observeOnlyPolicy()},
			want:   want{err: true, hides: []string{"c_web", "cluster-scoped managed resource web"}},
		},
		"ManageAnotherNamespacesWidget": {
			reason: "Taking over team-b's widget is refused without naming its owner.",
			labels: map[string]string{ownership.OwnerLabel: "n_team-b.web"},
			mods:   []mod{explicitName("victim")},
			want:   want{err: true, hides: []string{"team-b"}},
		},
		"ObserveOwnNamespacesWidget": {
			reason: "An Observe-only import of a widget another Widget of the same namespace manages is allowed.",
			labels: map[string]string{ownership.OwnerLabel: "n_team-a.other"},
			mods:   []mod{explicitName("sibling"), observeOnlyPolicy()},
			want:   want{exists: true, status: true},
		},
		"ObserveUnownedWidget": {
			reason: "Importing a widget no resource manages stays possible.",
			labels: map[string]string{"team": "a"},
			mods:   []mod{explicitName("legacy"), observeOnlyPolicy()},
			want:   want{exists: true, status: true},
		},
		"ClusterScopedObservesAnything": {
			reason:  "A cluster-scoped resource is the platform team's: it may observe any widget.",
			cluster: true,
			labels:  map[string]string{ownership.OwnerLabel: "n_team-b.web"},
			mods:    []mod{explicitName("victim"), observeOnlyPolicy()},
			want:    want{exists: true, status: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			api := env.Client(t, apitest.TokenA)
			var mg commonv1beta1.WidgetResource = newNamespaced()
			if tc.cluster {
				mg = newCluster()
			}
			for _, m := range tc.mods {
				m(mg)
			}
			seeded := (&seed{size: "small", labels: tc.labels, description: "team-b's", state: widgetapi.StateReady}).
				create(t, api, mg.GetAnnotations()["crossplane.io/external-name"], ownership.Marker(mg))
			if tc.stale {
				mg.SetWidgetObservation(observation(seeded))
			}
			e := &external[commonv1beta1.WidgetResource]{api: api, record: event.NewNopRecorder(), metrics: metrics.New(), kind: "Widget"}

			o, err := e.Observe(t.Context(), mg)
			if (err != nil) != tc.want.err {
				t.Fatalf("%s\nObserve(...): want error %t, got %v", tc.reason, tc.want.err, err)
			}
			mentions(t, tc.reason, err, tc.want.mentions, ownership.Marker(mg))
			for _, f := range tc.want.hides {
				if strings.Contains(err.Error(), f) {
					t.Errorf("%s\nObserve(...): error %q reveals %q", tc.reason, err, f)
				}
			}
			if o.ResourceExists != tc.want.exists {
				t.Errorf("%s\nObserve(...).ResourceExists: want %t, got %t", tc.reason, tc.want.exists, o.ResourceExists)
			}
			if tc.want.exists && len(o.ConnectionDetails) == 0 {
				t.Errorf("%s\nObserve(...): an observed widget publishes its endpoint", tc.reason)
			}
			if !tc.want.exists && len(o.ConnectionDetails) > 0 {
				t.Errorf("%s\nObserve(...): a refused widget's connection details were published: %v", tc.reason, o.ConnectionDetails)
			}
			want := commonv1beta1.WidgetObservation{}
			if tc.want.status {
				want = observation(seeded)
			}
			if diff := cmp.Diff(want, *mg.GetWidgetObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if !tc.want.exists && mg.GetWidgetParameters().Description != nil {
				t.Errorf("%s\nspec.forProvider was late-initialized from a refused widget: %+v", tc.reason, *mg.GetWidgetParameters())
			}
		})
	}
}
