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
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestCreate(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testCreate(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testCreate(t, newCluster) })
}

func testCreate[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
	// widget is what the test compares of the widget in the API.
	type widget struct {
		Size, Region, Description string
		Labels                    map[string]string
		State                     widgetapi.State
	}
	type want struct {
		err      error
		mentions []string
		checked  func(error) bool
		// widget is the widget in the API afterwards, nil for none.
		widget *widget
		ready  xpv2.Condition
	}
	cases := map[string]struct {
		reason string
		server func(*server.Options)
		seed   *seed
		mods   []mod
		want   want
	}{
		"AllFields": {
			reason: "The widget is created as specified, in the region spec.initProvider names, carrying our marker, and its status is recorded at once.",
			mods:   []mod{defaultName(), withSpec(full), withInit(commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")})},
			want: want{
				widget: &widget{Size: "small", Region: "eu-west-1", Description: "web tier", State: widgetapi.StateProvisioning,
					Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				ready: xpv2.Creating(),
			},
		},
		"ServerDefaults": {
			reason: "Unset fields are left to the server's defaults; the marker is always set.",
			mods:   []mod{explicitName("imported")},
			want: want{
				widget: &widget{Size: "small", Region: "us-east-1", State: widgetapi.StateProvisioning, Labels: map[string]string{ownership.OwnerLabel: ownerPlaceholder}},
				ready:  xpv2.Creating(),
			},
		},
		"InitProviderOnly": {
			reason: "Values set only in spec.initProvider are used to create the widget.",
			mods: []mod{defaultName(), withInit(commonv1beta1.WidgetInitParameters{
				Region: ptr.To("eu-west-1"), Size: ptr.To("medium"), Labels: map[string]string{"team": "b"}, Description: ptr.To("first"),
			})},
			want: want{
				widget: &widget{Size: "medium", Region: "eu-west-1", Description: "first", State: widgetapi.StateProvisioning,
					Labels: map[string]string{"team": "b", ownership.OwnerLabel: ownerPlaceholder}},
				ready: xpv2.Creating(),
			},
		},
		"ForProviderWins": {
			reason: "Where spec.forProvider and spec.initProvider both set a field, forProvider's value is used; labels are one field, so forProvider's replace initProvider's (Observe compares forProvider's as the whole set: merged keys would be removed as drift).",
			mods: []mod{defaultName(), withSpec(full), withInit(commonv1beta1.WidgetInitParameters{
				Size: ptr.To("large"), Labels: map[string]string{"team": "b", "env": "prod"}, Description: ptr.To("first"),
			})},
			want: want{
				widget: &widget{Size: "small", Region: "us-east-1", Description: "web tier", State: widgetapi.StateProvisioning,
					Labels: map[string]string{"team": "a", ownership.OwnerLabel: ownerPlaceholder}},
				ready: xpv2.Creating(),
			},
		},
		"InitProviderFillsGaps": {
			reason: "spec.initProvider supplies the fields spec.forProvider leaves unset, field by field.",
			mods: []mod{defaultName(), withSpec(commonv1beta1.WidgetParameters{Description: ptr.To("web tier")}),
				withInit(commonv1beta1.WidgetInitParameters{Size: ptr.To("large"), Labels: map[string]string{"env": "prod"}, Description: ptr.To("first")})},
			want: want{
				widget: &widget{Size: "large", Region: "us-east-1", Description: "web tier", State: widgetapi.StateProvisioning,
					Labels: map[string]string{"env": "prod", ownership.OwnerLabel: ownerPlaceholder}},
				ready: xpv2.Creating(),
			},
		},
		"AlreadyExists": {
			reason: "A name taken in the meantime is an error that says so, and the existing widget is left alone.",
			seed:   withSeed(fullSeed(""), func(s *seed) { s.state = widgetapi.StateProvisioning }),
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1beta1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"already has a widget named"},
				widget: &widget{Size: "small", Region: "us-east-1", Description: "web tier", State: widgetapi.StateProvisioning, Labels: map[string]string{"team": "a"}},
				ready:  noReady,
			},
		},
		"MostLabels": {
			reason: "A spec with as many labels as the CRD allows (31) can be created: with the ownership marker that is the 32 the API allows.",
			mods:   []mod{defaultName(), withSpec(commonv1beta1.WidgetParameters{Labels: mostLabels()})},
			want: want{
				widget: &widget{Size: "small", Region: "us-east-1", State: widgetapi.StateProvisioning,
					Labels: func() map[string]string { l := mostLabels(); l[ownership.OwnerLabel] = ownerPlaceholder; return l }()},
				ready: xpv2.Creating(),
			},
		},
		"Rejected": {
			reason: "A create the API rejects goes through Check and is returned.",
			mods:   []mod{defaultName(), withSpec(full), withInit(commonv1beta1.WidgetInitParameters{Region: ptr.To("Not A Region")})},
			want:   want{err: cmpopts.AnyError, checked: isInvalid, ready: noReady},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.ProvisionDelay = time.Hour
			}), apitest.WithOptions(tc.server))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			forProvider, initProvider := mg.GetWidgetParameters().DeepCopy(), mg.GetWidgetInitParameters().DeepCopy()
			owner := ownership.Marker(mg)
			name := meta.GetExternalName(mg)
			if tc.seed != nil {
				tc.seed.create(t, api, name, owner)
			}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: event.NewNopRecorder(), metrics: metrics.New(), kind: "Widget"}

			got, err := e.Create(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nCreate(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			mentions(t, tc.reason, err, tc.want.mentions, owner)
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(managed.ExternalCreation{}, got); diff != "" {
				t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
			}

			w, gerr := api.GetWidget(t.Context(), name)
			var gotWidget *widget
			if gerr == nil {
				gotWidget = &widget{Size: w.Size, Region: w.Region, Description: w.Description, Labels: w.Labels, State: w.State}
			}
			var wantWidget *widget
			if tc.want.widget != nil {
				ww := *tc.want.widget
				ww.Labels = fillLabels(ww.Labels, owner)
				wantWidget = &ww
			}
			if diff := cmp.Diff(wantWidget, gotWidget); diff != "" {
				t.Errorf("%s\nwidget in the API: -want, +got:\n%s", tc.reason, diff)
			}
			wantStatus := commonv1beta1.WidgetObservation{}
			if err == nil {
				wantStatus = observation(w)
			}
			if diff := cmp.Diff(wantStatus, *mg.GetWidgetObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(forProvider, mg.GetWidgetParameters()); diff != "" {
				t.Errorf("%s\nCreate(...) changed spec.forProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(initProvider, mg.GetWidgetInitParameters()); diff != "" {
				t.Errorf("%s\nCreate(...) changed spec.initProvider: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
