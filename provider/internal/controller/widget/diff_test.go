package widget

import (
	"maps"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

const me = "n_team-a.web"

// markers are the ownership labels of Widget team-a/web.
var markers = map[string]string{ownership.OwnerLabel: me}

func TestCompare(t *testing.T) {
	owned := map[string]string{"team": "a", ownership.OwnerLabel: me}
	cases := map[string]struct {
		reason string
		p      commonv1beta1.WidgetParameters
		w      widgetapi.Widget
		want   string
	}{
		"UpToDate": {
			reason: "A widget that matches every specified field, and carries our marker, has no differences.",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("small"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			w:      widgetapi.Widget{Size: "small", Region: "us-east-1", Labels: owned, Description: "d"},
		},
		"ServerDefaults": {
			reason: "Fields the user left unset are not compared: server defaults are not drift.",
			p:      commonv1beta1.WidgetParameters{},
			w:      widgetapi.Widget{Size: "small", Region: "us-east-1", Labels: owned, Description: "d"},
		},
		"Size": {
			reason: "A different size is reported with both values.",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("large")},
			w:      widgetapi.Widget{Size: "small", Labels: owned},
			want:   `size: want "large", have "small"`,
		},
		"RegionNotCompared": {
			reason: "The region is not in spec.forProvider (spec.initProvider sets it at creation only): a widget in any region matches.",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("small")},
			w:      widgetapi.Widget{Size: "small", Region: "eu-west-1", Labels: owned},
		},
		"Labels": {
			reason: "Labels are compared as a whole, sorted, without the reserved ones.",
			p:      commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}},
			w:      widgetapi.Widget{Labels: map[string]string{"team": "b", "env": "prod", ownership.OwnerLabel: me}},
			want:   `labels: want {team=a}, have {env=prod, team=b}`,
		},
		"EmptyLabels": {
			reason: "An explicitly empty label set is compared: the widget's user labels are drift.",
			p:      commonv1beta1.WidgetParameters{Labels: map[string]string{}},
			w:      widgetapi.Widget{Labels: owned},
			want:   `labels: want {}, have {team=a}`,
		},
		"ReservedLabelsIgnored": {
			reason: "Labels under the provider's reserved prefix are not the user's to compare, and only the ownership markers are ours.",
			p:      commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}},
			w:      widgetapi.Widget{Labels: map[string]string{"team": "a", ownership.OwnerLabel: me, commonv1beta1.OwnershipLabelPrefix + "other": "x"}},
		},
		"Description": {
			reason: "A different description is reported, quoted.",
			p:      commonv1beta1.WidgetParameters{Description: ptr.To("web tier")},
			w:      widgetapi.Widget{Description: "", Labels: owned},
			want:   `description: want "web tier", have ""`,
		},
		"OwnerMissing": {
			reason: "A widget without our ownership marker differs, even if every field matches.",
			p:      commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}},
			w:      widgetapi.Widget{Labels: map[string]string{"team": "a"}},
			want:   `ownership labels: want {widgetco.io/owner=n_team-a.web}, have {}`,
		},
		"OwnerOther": {
			reason: "A widget marked for another owner differs.",
			p:      commonv1beta1.WidgetParameters{},
			w:      widgetapi.Widget{Labels: map[string]string{ownership.OwnerLabel: "c_web"}},
			want:   `ownership labels: want {widgetco.io/owner=n_team-a.web}, have {widgetco.io/owner=c_web}`,
		},
		"OwnerNamespaceStale": {
			reason: "A namespace marker the resource does not set is an ownership difference.",
			p:      commonv1beta1.WidgetParameters{},
			w:      widgetapi.Widget{Labels: map[string]string{ownership.OwnerLabel: me, ownership.NamespaceLabel: "team-b"}},
			want:   `ownership labels: want {widgetco.io/owner=n_team-a.web}, have {widgetco.io/owner=n_team-a.web, widgetco.io/owner-namespace=team-b}`,
		},
		"Everything": {
			reason: "Every difference is listed in a stable order: size, labels, description, owner.",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("large"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			w:      widgetapi.Widget{Size: "small", Region: "us-east-1"},
			want:   `size: want "large", have "small"; labels: want {team=a}, have {}; description: want "d", have ""; ownership labels: want {widgetco.io/owner=n_team-a.web}, have {}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := compare(&tc.p, &tc.w, markers)
			if diff := cmp.Diff(tc.want, d.String()); diff != "" {
				t.Errorf("%s\ncompare(...).String(): -want, +got:\n%s", tc.reason, diff)
			}
			if d.empty() != (tc.want == "") {
				t.Errorf("%s\ncompare(...).empty(): got %t with differences %q", tc.reason, d.empty(), d.String())
			}
		})
	}
}

func TestDifferencesString(t *testing.T) {
	cases := map[string]struct {
		reason string
		d      differences
		want   string
	}{
		"None":  {reason: "No differences render as nothing.", want: ""},
		"One":   {reason: "One difference is one clause.", d: differences{{"size", `"a"`, `"b"`}}, want: `size: want "a", have "b"`},
		"Order": {reason: "Clauses keep their order, separated by semicolons.", d: differences{{"x", "1", "2"}, {"y", "3", "4"}}, want: "x: want 1, have 2; y: want 3, have 4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.d.String()); diff != "" {
				t.Errorf("%s\nString(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLateInitialize(t *testing.T) {
	full := widgetapi.Widget{Size: "medium", Region: "eu-west-1", Labels: map[string]string{"team": "a", ownership.OwnerLabel: me}, Description: "d"}
	cases := map[string]struct {
		reason      string
		p           commonv1beta1.WidgetParameters
		init        commonv1beta1.WidgetInitParameters
		w           widgetapi.Widget
		want        commonv1beta1.WidgetParameters
		wantChanged bool
	}{
		"Empty": {
			reason:      "Every unset field takes the widget's value; reserved labels stay out of the spec, and the region has no place in it.",
			w:           full,
			want:        commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			wantChanged: true,
		},
		"AllSet": {
			reason: "Fields the user set are never overwritten, even when they differ (that is drift).",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("large"), Labels: map[string]string{"x": "y"}, Description: ptr.To("mine")},
			w:      full,
			want:   commonv1beta1.WidgetParameters{Size: ptr.To("large"), Labels: map[string]string{"x": "y"}, Description: ptr.To("mine")},
		},
		"Partial": {
			reason:      "Only the unset fields are filled.",
			p:           commonv1beta1.WidgetParameters{Size: ptr.To("large")},
			w:           full,
			want:        commonv1beta1.WidgetParameters{Size: ptr.To("large"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			wantChanged: true,
		},
		"InitProviderSet": {
			reason: "Fields set in spec.initProvider were for the creation only: they stay unset in spec.forProvider, so Crossplane does not manage them.",
			init:   commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("small"), Labels: map[string]string{"team": "b"}, Description: ptr.To("first")},
			w:      full,
		},
		"InitProviderPartial": {
			reason:      "Only the fields spec.initProvider leaves unset are filled.",
			init:        commonv1beta1.WidgetInitParameters{Size: ptr.To("small")},
			w:           full,
			want:        commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			wantChanged: true,
		},
		"InitProviderRegionOnly": {
			reason:      "A region in spec.initProvider does not stop the other fields from being filled.",
			init:        commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")},
			w:           full,
			want:        commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			wantChanged: true,
		},
		"InitProviderEmptyLabels": {
			reason:      "Explicitly empty labels in spec.initProvider are set there: spec.forProvider's labels stay unset.",
			init:        commonv1beta1.WidgetInitParameters{Labels: map[string]string{}},
			w:           full,
			want:        commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Description: ptr.To("d")},
			wantChanged: true,
		},
		"NothingToLearn": {
			reason: "Empty values and reserved-only labels leave the spec alone.",
			w:      widgetapi.Widget{Region: "us-east-1", Labels: map[string]string{ownership.OwnerLabel: me}},
		},
		"EmptyLabelsKept": {
			reason: "An explicitly empty label set is the user's choice, not unset.",
			p:      commonv1beta1.WidgetParameters{Labels: map[string]string{}},
			w:      widgetapi.Widget{Labels: map[string]string{"team": "a"}},
			want:   commonv1beta1.WidgetParameters{Labels: map[string]string{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			initBefore := tc.init.DeepCopy()
			changed := lateInitialize(&tc.p, &tc.init, &tc.w)
			if diff := cmp.Diff(tc.want, tc.p); diff != "" {
				t.Errorf("%s\nparameters: -want, +got:\n%s", tc.reason, diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("%s\nlateInitialize(...): want %t, got %t", tc.reason, tc.wantChanged, changed)
			}
			if diff := cmp.Diff(*initBefore, tc.init); diff != "" {
				t.Errorf("%s\nlateInitialize(...) changed spec.initProvider: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCreation(t *testing.T) {
	type want struct {
		Size, Region, Description string
		Labels                    map[string]string
	}
	cases := map[string]struct {
		reason string
		p      commonv1beta1.WidgetParameters
		init   commonv1beta1.WidgetInitParameters
		want   want
	}{
		"Nothing": {
			reason: "With nothing set the API picks its defaults, and there are no user labels.",
		},
		"ForProviderOnly": {
			reason: "spec.forProvider's fields are used; the region is left to the API.",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("small"), Labels: map[string]string{"team": "a"}, Description: ptr.To("web tier")},
			want:   want{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a"}},
		},
		"InitProviderOnly": {
			reason: "spec.initProvider's fields, the region among them, are used when spec.forProvider leaves them unset.",
			init:   commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("medium"), Labels: map[string]string{"team": "b"}, Description: ptr.To("first")},
			want:   want{Size: "medium", Region: "eu-west-1", Description: "first", Labels: map[string]string{"team": "b"}},
		},
		"ForProviderWins": {
			reason: "Where both set a field spec.forProvider's value is used; labels are one field, so forProvider's replace initProvider's (Observe compares forProvider's as the whole set: merged keys would be removed as drift).",
			p:      commonv1beta1.WidgetParameters{Size: ptr.To("small"), Labels: map[string]string{"team": "a"}, Description: ptr.To("web tier")},
			init:   commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("large"), Labels: map[string]string{"team": "b", "env": "prod"}, Description: ptr.To("first")},
			want:   want{Size: "small", Region: "eu-west-1", Description: "web tier", Labels: map[string]string{"team": "a"}},
		},
		"FieldByField": {
			reason: "Each field comes from wherever it is set.",
			p:      commonv1beta1.WidgetParameters{Description: ptr.To("web tier")},
			init:   commonv1beta1.WidgetInitParameters{Size: ptr.To("large"), Labels: map[string]string{"env": "prod"}},
			want:   want{Size: "large", Description: "web tier", Labels: map[string]string{"env": "prod"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pBefore, initBefore := tc.p.DeepCopy(), tc.init.DeepCopy()
			var got want
			got.Size, got.Region, got.Description, got.Labels = creation(&tc.p, &tc.init)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncreation(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(*pBefore, tc.p); diff != "" {
				t.Errorf("%s\ncreation(...) changed spec.forProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(*initBefore, tc.init); diff != "" {
				t.Errorf("%s\ncreation(...) changed spec.initProvider: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDesiredLabels(t *testing.T) {
	cases := map[string]struct {
		reason  string
		labels  map[string]string
		current map[string]string
		want    map[string]string
	}{
		"Specified": {
			reason:  "The user's labels replace the widget's, plus our markers.",
			labels:  map[string]string{"team": "a"},
			current: map[string]string{"team": "b", "extra": "x"},
			want:    map[string]string{"team": "a", ownership.OwnerLabel: me},
		},
		"Unspecified": {
			reason:  "Without labels in the spec the widget keeps its labels, reserved ones included, and gets our markers.",
			current: map[string]string{"team": "b", commonv1beta1.OwnershipLabelPrefix + "other": "x"},
			want:    map[string]string{"team": "b", commonv1beta1.OwnershipLabelPrefix + "other": "x", ownership.OwnerLabel: me},
		},
		"MarkersReplaced": {
			reason:  "Our markers replace any other owner's, including a stale namespace marker.",
			current: map[string]string{ownership.OwnerLabel: "c_web", ownership.NamespaceLabel: "team-b"},
			want:    map[string]string{ownership.OwnerLabel: me},
		},
		"EmptySpec": {
			reason:  "An explicitly empty label set leaves only our markers.",
			labels:  map[string]string{},
			current: map[string]string{"team": "b"},
			want:    map[string]string{ownership.OwnerLabel: me},
		},
		"Nothing": {
			reason: "A widget without labels gets just our markers.",
			want:   map[string]string{ownership.OwnerLabel: me},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := maps.Clone(tc.labels)
			got := desiredLabels(tc.labels, tc.current, markers, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndesiredLabels(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, tc.labels, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\ndesiredLabels(...) changed the spec's labels: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObservation(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	updated := created.Add(90 * time.Minute)
	labels := map[string]string{"team": "a"}
	cases := map[string]struct {
		reason string
		w      widgetapi.Widget
		want   commonv1beta1.WidgetObservation
	}{
		"Full": {
			reason: "Every field is copied; timestamps are cut to seconds, as Kubernetes stores them.",
			w: widgetapi.Widget{ID: "w-1", Name: "web", Size: "small", Region: "us-east-1", Labels: labels, Description: "d",
				State: widgetapi.StateFailed, Message: "no capacity", Endpoint: "https://w-1.example", Generation: 3, CreatedAt: created, UpdatedAt: updated},
			want: commonv1beta1.WidgetObservation{ID: "w-1", State: commonv1beta1.WidgetStateFailed, Message: "no capacity", Endpoint: "https://w-1.example",
				Generation: 3, Size: "small", Region: "us-east-1", Labels: labels, Description: "d",
				CreatedAt: ptr.To(metav1.NewTime(created.Truncate(time.Second))), UpdatedAt: ptr.To(metav1.NewTime(updated.Truncate(time.Second)))},
		},
		"NoTimestamps": {
			reason: "Zero timestamps are left unset rather than reported as 1970.",
			w:      widgetapi.Widget{ID: "w-1", State: widgetapi.StateReady},
			want:   commonv1beta1.WidgetObservation{ID: "w-1", State: commonv1beta1.WidgetStateReady},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := observation(&tc.w)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nobservation(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.w.Labels != nil {
				got.Labels["team"] = "changed"
				if tc.w.Labels["team"] != "a" {
					t.Errorf("%s\nobservation(...) shares its labels with the widget", tc.reason)
				}
			}
			back := fromObservation(&got)
			if back.Size != tc.w.Size || back.Region != tc.w.Region || back.Description != tc.w.Description {
				t.Errorf("%s\nfromObservation(observation(w)) = %+v, want w's size, region and description", tc.reason, back)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	cases := map[string]struct {
		reason   string
		w        widgetapi.Widget
		deleting bool
		want     xpv2.Condition
	}{
		"Ready":        {reason: "Ready only when the API says Ready.", w: widgetapi.Widget{State: widgetapi.StateReady}, want: xpv2.Available()},
		"Provisioning": {reason: "Provisioning is Creating.", w: widgetapi.Widget{State: widgetapi.StateProvisioning}, want: xpv2.Creating()},
		"Resizing": {
			reason: "Resizing is not ready, with its own reason and the target size.",
			w:      widgetapi.Widget{State: widgetapi.StateResizing, Size: "large"},
			want:   xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonResizing, Message: "The Widget API is resizing the widget to large"},
		},
		"Failed": {
			reason: "Failed is unavailable with the API's message.",
			w:      widgetapi.Widget{State: widgetapi.StateFailed, Message: "region has no capacity"},
			want:   xpv2.Unavailable().WithMessage("The widget failed: region has no capacity"),
		},
		"DeletingByUs": {reason: "Deleting because the resource is deleted is Deleting.", w: widgetapi.Widget{State: widgetapi.StateDeleting}, deleting: true, want: xpv2.Deleting()},
		"DeletingOutOfBand": {
			reason: "Deleting out of band is unavailable, and says the widget will come back.",
			w:      widgetapi.Widget{State: widgetapi.StateDeleting},
			want:   xpv2.Unavailable().WithMessage("The widget is being deleted outside Crossplane; it will be created again once it is gone"),
		},
		"Unknown": {
			reason: "A state this provider does not know is unavailable, naming the state.",
			w:      widgetapi.Widget{State: "Hibernating"},
			want:   xpv2.Unavailable().WithMessage(`The widget is in state "Hibernating", which this provider does not know`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := readiness(&tc.w, tc.deleting)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("%s\nreadiness(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObserveOnly(t *testing.T) {
	cases := map[string]struct {
		reason   string
		policies xpv2.ManagementPolicies
		want     bool
	}{
		"Default":     {reason: "The default policies manage the widget.", policies: xpv2.ManagementPolicies{xpv2.ManagementActionAll}},
		"Unset":       {reason: "No policies are the default."},
		"ObserveOnly": {reason: "Observe alone only observes (import).", policies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve}, want: true},
		"ObserveAndUpdate": {
			reason:   "Observe with other actions is not observe-only.",
			policies: xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := &nsv1beta1.Widget{}
			mg.SetManagementPolicies(tc.policies)
			if got := observeOnly(mg); got != tc.want {
				t.Errorf("%s\nobserveOnly(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}

func TestCause(t *testing.T) {
	cases := map[string]struct {
		reason   string
		adopting bool
		synced   *xpv2.Condition
		want     string
	}{
		"Adopting": {
			reason:   "Taking over an unowned widget is an adoption, whatever the conditions say.",
			adopting: true,
			synced:   ptr.To(xpv2.ReconcileSuccess().WithObservedGeneration(1)),
			want:     "adopt",
		},
		"NeverSynced": {reason: "A resource that never synced is following its spec.", want: "spec"},
		"SyncedThisGeneration": {
			reason: "A resource that synced its current spec and differs again was changed behind our back: drift.",
			synced: ptr.To(xpv2.ReconcileSuccess().WithObservedGeneration(1)),
			want:   "drift",
		},
		"SyncedOlderGeneration": {
			reason: "A resource whose spec changed since the last sync is following its spec.",
			synced: ptr.To(xpv2.ReconcileSuccess()),
			want:   "spec",
		},
		"SyncFailed": {
			reason: "A resource whose last sync failed is retrying its spec, not repairing drift.",
			synced: ptr.To(xpv2.ReconcileError(errBoom).WithObservedGeneration(1)),
			want:   "spec",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
			if tc.synced != nil {
				mg.SetConditions(*tc.synced)
			}
			e := &external[*nsv1beta1.Widget]{adopting: tc.adopting}
			if got := e.cause(mg); got != tc.want {
				t.Errorf("%s\ncause(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}
