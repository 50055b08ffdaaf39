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
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestObserve(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testObserve(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testObserve(t, newCluster) })
}

func testObserve[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
	type want struct {
		// o is the observation, except its connection details.
		o managed.ExternalObservation
		// endpoint says whether the widget's endpoint is published as a
		// connection detail.
		endpoint bool
		err      error
		mentions []string
		checked  func(error) bool
		ready    xpv2.Condition
		spec     commonv1beta1.WidgetParameters
		// status says whether status.atProvider shows the widget.
		status   bool
		adopting bool
	}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		seed    *seed
		before  func(t *testing.T, api *widgetapi.Client)
		mods    []mod
		knownID bool
		want    want
	}{
		"NoExternalName": {
			reason: "A resource without an external name has no widget yet.",
			want:   want{ready: noReady},
		},
		"InvalidExternalName": {
			reason: "An external name the API could never accept is an error saying what a valid name is.",
			mods:   []mod{explicitName("Not_A_Widget")},
			want:   want{err: cmpopts.AnyError, mentions: []string{`"Not_A_Widget"`, "lowercase"}, ready: noReady},
		},
		"NotFound": {
			reason: "A widget that does not exist is reported as such, so it is created.",
			mods:   []mod{defaultName(), withSpec(full)},
			want:   want{ready: noReady, spec: full},
		},
		"NeverCreatedNotRead": {
			reason: "A new resource under its default name that never started a create is not read: its widget is created next (the seeded widget proves no read happened).",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{chosenName(), withSpec(full)},
			want:   want{ready: noReady, spec: full},
		},
		"NeverCreatedObserveOnly": {
			reason: "An observe-only resource is always read, whatever its name.",
			seed:   fullSeed(""),
			mods:   []mod{chosenName(), observeOnlyPolicy()},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceLateInitialized: true,
					Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true, adopting: true,
			},
		},
		"NeverCreatedKnownID": {
			reason:  "A resource that observed its widget before (its ID is in status) is read even without a pending create.",
			seed:    fullSeed(ownerPlaceholder),
			mods:    []mod{chosenName(), withSpec(full)},
			knownID: true,
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"NeverCreatedDeleted": {
			reason: "A deleted resource is read, so that a widget it owns is deleted with it.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{chosenName(), withSpec(full), deleted()},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"ExplicitNameRead": {
			reason: "A resource that names its widget (an import) is read before anything is created.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{explicitName("imported"), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"UpToDate": {
			reason: "A widget that matches the spec and carries our marker is up to date, Ready, and publishes its endpoint.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"SizeDrift": {
			reason: "A different size is drift, with a readable diff.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `size: want "large", have "small"`},
				endpoint: true, ready: xpv2.Available(), status: true,
				spec: with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"LabelsDrift": {
			reason: "Different user labels are drift; the diff lists both sets without the marker.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.labels = map[string]string{"team": "b", "env": "prod"} }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `labels: want {team=a}, have {env=prod, team=b}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"DescriptionDrift": {
			reason: "A different description is drift.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.description = "changed by hand" }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `description: want "web tier", have "changed by hand"`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"InitProviderRegionIgnored": {
			reason: "spec.initProvider.region is used only to create the widget: a widget in another region is up to date.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(full), withInit(commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")})},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"InitProviderNotCompared": {
			reason: "Values set only in spec.initProvider are neither compared (the widget changed since its creation is up to date) nor late-initialized into spec.forProvider; the other fields are.",
			seed:   fullSeed(ownerPlaceholder),
			mods: []mod{defaultName(), withInit(commonv1beta1.WidgetInitParameters{
				Region: ptr.To("eu-west-1"), Size: ptr.To("large"), Description: ptr.To("first"),
			})},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ResourceLateInitialized: true},
				endpoint: true, ready: xpv2.Available(), status: true,
				spec: commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}},
			},
		},
		"OwnerLabelRemoved": {
			reason:  "A widget we recorded (by ID) whose marker someone removed is ours: drift to repair, not an adoption.",
			seed:    fullSeed(""),
			mods:    []mod{defaultName(), withSpec(full)},
			knownID: true,
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"TakeOverAfterImportReview": {
			reason:  "A widget recorded only by an Observe-only import review (its ID in status, the review's UpToDate condition left) and now under full management is adopted, not drift repaired: Update says AdoptedWidget.",
			seed:    fullSeed(""),
			mods:    []mod{explicitName("imported"), withSpec(full), reviewedImport()},
			knownID: true,
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true, adopting: true,
			},
		},
		"ServerDefaultsAreNotDrift": {
			reason: "Size and region the user left unset take the server's defaults; they are not drift, and the size is late-initialized (the region has no place in spec.forProvider).",
			seed:   &seed{owner: ownerPlaceholder, state: widgetapi.StateReady},
			mods:   []mod{defaultName()},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ResourceLateInitialized: true},
				endpoint: true, ready: xpv2.Available(), status: true,
				spec: commonv1beta1.WidgetParameters{Size: ptr.To("small")},
			},
		},
		"LateInitialize": {
			reason: "Every field the user left unset is filled from the widget, user labels only.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(commonv1beta1.WidgetParameters{Size: ptr.To("small")})},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ResourceLateInitialized: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"OwnedByAnother": {
			reason: "A widget another resource manages is a clear error naming that resource, never a takeover.",
			seed:   fullSeed("n_team-a.other"),
			mods:   []mod{explicitName("shared"), withSpec(full)},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"shared", "namespaced managed resource team-a/other"},
				ready: noReady, spec: full,
			},
		},
		"OwnedByAnotherRecordedID": {
			reason:  "A widget we once recorded that another resource now manages is still not ours.",
			seed:    fullSeed("n_team-a.other"),
			mods:    []mod{defaultName(), withSpec(full)},
			knownID: true,
			want: want{
				err: cmpopts.AnyError, mentions: []string{"namespaced managed resource team-a/other"},
				ready: noReady, spec: full,
			},
		},
		"OwnedByAnotherWhileDeleting": {
			reason: "Deleting a resource must never delete a widget another resource manages: it reports no widget.",
			seed:   fullSeed("n_other.web"),
			mods:   []mod{explicitName("shared"), withSpec(full), deleted()},
			want:   want{ready: noReady, spec: full},
		},
		"UnownedUnderDefaultName": {
			reason: "An existing unowned widget under a name the provider chose is not adopted silently: an error says how to adopt it.",
			seed:   fullSeed(""),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"crossplane.io/external-name"},
				ready: noReady, spec: full,
			},
		},
		"UnownedUnderDefaultNameWhileDeleting": {
			reason: "Deleting a resource that refused to adopt an unowned widget must not delete that widget: it reports no widget.",
			seed:   fullSeed(""),
			mods:   []mod{defaultName(), withSpec(full), deleted()},
			want:   want{ready: noReady, spec: full},
		},
		"UnownedUnderExplicitName": {
			reason: "An unowned widget named explicitly is adopted: it exists, is late-initialized, and needs our marker.",
			seed:   fullSeed(""),
			mods:   []mod{explicitName("imported")},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceLateInitialized: true,
					Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true, adopting: true,
			},
		},
		"ObserveOnlyImport": {
			reason: "With management policy Observe an unowned widget is observed and late-initialized without error, even under a defaulted name.",
			seed:   fullSeed(""),
			mods:   []mod{defaultName(), observeOnlyPolicy()},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceLateInitialized: true,
					Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true, adopting: true,
			},
		},
		"Provisioning": {
			reason: "A provisioning widget is Creating and has no endpoint yet.",
			server: func(o *server.Options) { o.ProvisionDelay = time.Hour },
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.state = widgetapi.StateProvisioning }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready: xpv2.Creating(), spec: full, status: true,
			},
		},
		"Resizing": {
			reason: "A resizing widget is not ready, with reason Resizing and the target size.",
			server: func(o *server.Options) { o.ResizeDelay = time.Hour },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = resize("large")
				s.state = widgetapi.StateResizing
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, status: true,
				ready: xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonResizing, Message: "The Widget API is resizing the widget to large"},
				spec:  with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"Failed": {
			reason: "A failed widget is unavailable with the API's message.",
			server: func(o *server.Options) { o.FailingRegions = []string{"eu-fail-1"} },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.region = "eu-fail-1"
				s.state = widgetapi.StateFailed
			}),
			mods: []mod{defaultName(), withSpec(full), withInit(commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-fail-1")})},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready: xpv2.Unavailable().WithMessage("The widget failed: region eu-fail-1 has no capacity for new widgets; " +
					"delete this widget and create it in another region"),
				spec:   full,
				status: true,
			},
		},
		"DeletingInBand": {
			reason: "A widget being deleted because the resource is deleted is Deleting, and not compared (nothing to update).",
			server: func(o *server.Options) { o.DeleteDelay = time.Hour },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = deleteWidget
				s.state = widgetapi.StateDeleting
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") })), deleted()},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Deleting(), status: true,
				spec: with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"DeletingOutOfBand": {
			reason: "A widget someone else is deleting is unavailable, says it will come back, and is not updated meanwhile.",
			server: func(o *server.Options) { o.DeleteDelay = time.Hour },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = deleteWidget
				s.state = widgetapi.StateDeleting
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, status: true,
				ready: xpv2.Unavailable().WithMessage("The widget is being deleted outside Crossplane; it will be created again once it is gone"),
				spec:  with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"RateLimited": {
			reason: "A 429 goes through the session's Check (which throttles) and is returned.",
			server: apitest.RateLimited,
			before: apitest.Exhaust,
			mods:   []mod{defaultName(), withSpec(full)},
			want:   want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady, spec: full},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(tc.server))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			initProvider := mg.GetWidgetInitParameters().DeepCopy()
			owner := ownership.Marker(mg)
			var seeded *widgetapi.Widget
			if tc.seed != nil {
				seeded = tc.seed.create(t, api, meta.GetExternalName(mg), owner)
			}
			if tc.knownID {
				mg.SetWidgetObservation(commonv1beta1.WidgetObservation{ID: seeded.ID})
			}
			if tc.before != nil {
				tc.before(t, api)
			}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: event.NewNopRecorder(), metrics: metrics.New(), kind: "Widget"}

			got, err := e.Observe(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nObserve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			mentions(t, tc.reason, err, tc.want.mentions, owner)
			apiError(t, tc.reason, err, tc.want.checked)

			wantO := tc.want.o
			wantO.Diff = fill(wantO.Diff, owner)
			if diff := cmp.Diff(wantO, got, cmpopts.IgnoreFields(managed.ExternalObservation{}, "ConnectionDetails")); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			var wantCD managed.ConnectionDetails
			if tc.want.endpoint {
				wantCD = managed.ConnectionDetails{"endpoint": []byte(seeded.Endpoint)}
			}
			if diff := cmp.Diff(wantCD, got.ConnectionDetails); diff != "" {
				t.Errorf("%s\nObserve(...).ConnectionDetails: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.spec, *mg.GetWidgetParameters(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nspec.forProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(initProvider, mg.GetWidgetInitParameters()); diff != "" {
				t.Errorf("%s\nObserve(...) changed spec.initProvider: -want, +got:\n%s", tc.reason, diff)
			}
			wantStatus := commonv1beta1.WidgetObservation{}
			switch {
			case tc.want.status:
				wantStatus = observation(seeded)
			case tc.knownID:
				wantStatus = commonv1beta1.WidgetObservation{ID: seeded.ID}
			}
			if diff := cmp.Diff(wantStatus, *mg.GetWidgetObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			// After an error or a "gone" there is no Update, so adopting
			// does not matter.
			if err == nil && tc.want.o.ResourceExists && e.adopting != tc.want.adopting {
				t.Errorf("%s\nadopting: want %t, got %t", tc.reason, tc.want.adopting, e.adopting)
			}
		})
	}
}

func TestImportReview(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testImportReview(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testImportReview(t, newCluster) })
}

// testImportReview checks the UpToDate condition: under management policy
// Observe it says whether taking the widget over would change it, field by
// field; once taken over it says so with a fixed message; a resource that
// was never observe-only does not get it.
func testImportReview[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
	reviewed := func(mg commonv1beta1.WidgetResource) {
		mg.SetConditions(xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonWouldChange, Message: "earlier review"})
	}
	cases := map[string]struct {
		reason string
		seed   *seed
		mods   []mod
		// namespaced runs the case for namespaced resources only.
		namespaced bool
		wantErr    bool
		want       xpv2.Condition
	}{
		"NotFound": {
			reason: "Reviewing a name that no widget has says so, so that a composition function can reject the adoption.",
			mods:   []mod{explicitName("missing"), observeOnlyPolicy()},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonNotFound,
				Message: "Widget missing does not exist in the Widget API: there is nothing to review or take over. Check the external name."},
		},
		"ManagedByAnother": {
			reason: "Reviewing a widget another resource manages says that a takeover would be refused, not what it would change.",
			seed:   fullSeed("n_team-a.other"),
			mods:   []mod{explicitName("shared"), withSpec(full), observeOnlyPolicy()},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonManagedByAnother,
				Message: "Switching to full management would be refused: widget shared is already managed by namespaced managed resource team-a/other (label widgetco.io/owner=n_team-a.other)."},
		},
		"TakeOverRaced": {
			reason:  "A takeover that finds the widget managed by another resource (it was adopted between review and takeover) replaces the review with the refusal.",
			seed:    fullSeed("n_team-a.other"),
			mods:    []mod{explicitName("shared"), withSpec(full), reviewed},
			wantErr: true,
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonManagedByAnother,
				Message: "Switching to full management would be refused: widget shared is already managed by namespaced managed resource team-a/other (label widgetco.io/owner=n_team-a.other)."},
		},
		"OutOfReach": {
			reason:     "Reviewing another namespace's widget says only that it is out of reach: neither the owner nor its namespace.",
			seed:       fullSeed("n_team-b.web"),
			mods:       []mod{explicitName("victim"), observeOnlyPolicy()},
			namespaced: true,
			wantErr:    true,
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonOutOfReach,
				Message: "Widget victim is managed by a resource outside namespace team-a: it can be neither reviewed nor taken over from here."},
		},
		"ImportUnowned": {
			reason: "Taking over an unowned widget adds the ownership labels, even when the spec matches: the review says so.",
			seed:   fullSeed(""),
			mods:   []mod{explicitName("imported"), withSpec(full), observeOnlyPolicy()},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonWouldChange,
				Message: "Switching to full management would change the widget: ownership labels: want {markers}, have {}"},
		},
		"ImportDiffers": {
			reason: "Each field the spec sets differently is listed, as the provider would repair it.",
			seed:   fullSeed(""),
			mods: []mod{explicitName("imported"), observeOnlyPolicy(), withSpec(with(full, func(p *commonv1beta1.WidgetParameters) {
				p.Size = ptr.To("medium")
				p.Description = ptr.To("checkout")
			}))},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonWouldChange,
				Message: `Switching to full management would change the widget: size: want "medium", have "small"; description: want "checkout", have "web tier"; ownership labels: want {markers}, have {}`},
		},
		"ObservedMatches": {
			reason: "A widget this resource already owns and whose fields match: nothing would change.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(full), observeOnlyPolicy()},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionTrue, Reason: ReasonNoDifference,
				Message: "The widget matches the spec: switching to full management would change nothing."},
		},
		"InitProviderIgnored": {
			reason: "spec.initProvider was for the creation only: a widget that differs from it would not change.",
			seed:   fullSeed(ownerPlaceholder),
			mods: []mod{defaultName(), withSpec(full), observeOnlyPolicy(),
				withInit(commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("large"), Description: ptr.To("first")})},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionTrue, Reason: ReasonNoDifference,
				Message: "The widget matches the spec: switching to full management would change nothing."},
		},
		"TakenOver": {
			reason: "After the takeover the review is replaced by a fixed statement, so drift repairs do not rewrite it.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.size = "large" }),
			mods:   []mod{defaultName(), withSpec(full), reviewed},
			want: xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionTrue, Reason: ReasonManaged,
				Message: "Fully managed: the provider applies the spec and repairs drift."},
		},
		"NeverObserveOnly": {
			reason: "A resource that was always fully managed gets no UpToDate condition.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.size = "large" }),
			mods:   []mod{defaultName(), withSpec(full)},
			want:   xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionUnknown},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			if tc.namespaced && mg.GetNamespace() == "" {
				t.Skip("namespaced resources only")
			}
			owner := ownership.Marker(mg)
			if tc.seed != nil {
				tc.seed.create(t, api, meta.GetExternalName(mg), owner)
			}
			e := &external[T]{api: api, record: event.NewNopRecorder(), metrics: metrics.New(), kind: "Widget"}
			if _, err := e.Observe(t.Context(), mg); (err != nil) != tc.wantErr {
				t.Fatalf("%s\nObserve(...): want error %t, got %v", tc.reason, tc.wantErr, err)
			}
			want := tc.want
			want.Message = fill(want.Message, owner)
			if diff := cmp.Diff(want, mg.GetCondition(TypeUpToDate), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nUpToDate condition: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
