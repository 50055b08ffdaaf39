package widgetkey

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestCreate(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testCreate(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testCreate(t, newCluster) })
}

func testCreate[T commonv1beta1.WidgetKeyResource](t *testing.T, newMG func() T) {
	type want struct {
		err      error
		mentions []string
		checked  func(error) bool
		// created says a key was created: the connection details carry its
		// secret.
		created bool
		// description is the created key's description.
		description string
		ready       xpv2.Condition
		// events are the events emitted; {key} stands for the key's name.
		events []event.Event
	}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		widget  widgetSeed
		seedKey bool
		// lost is what Observe found: the seeded key's secret was lost.
		lost bool
		// exhaust uses up the rate limit before Create.
		exhaust bool
		// deleteWidget starts deleting the widget before the test.
		deleteWidget bool
		mods         []mod
		want         want
	}{
		"SecretLost": {
			reason:  "A key whose secret was lost is revoked (with an event) and a new one created under the same name, with spec.initProvider's description.",
			widget:  readyWidget,
			seedKey: true,
			lost:    true,
			mods:    []mod{defaultName(), forWidget(widgetName), described("ci pipeline")},
			want: want{
				created: true, description: "ci pipeline", ready: xpv2.Creating(),
				events: []event.Event{event.Normal(ReasonRotated, "Key {key} existed but its secret was never recorded "+
					"(the provider stopped between creating it and saving it); revoked it to create a new one")},
			},
		},
		"RevokeRateLimited": {
			reason:  "A 429 revoking a key whose secret was lost goes through Check and is returned; no event claims a rotation.",
			server:  rateLimitedSlowProvisioning,
			widget:  provisioningWidget,
			seedKey: true,
			lost:    true,
			exhaust: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady},
		},
		"Created": {
			reason: "The key is created with spec.initProvider's description, and its secret, name and widget, and the widget's endpoint, are returned as connection details - the only place the secret goes.",
			widget: readyWidget,
			mods:   []mod{defaultName(), forWidget(widgetName), described("ci pipeline")},
			want:   want{created: true, description: "ci pipeline", ready: xpv2.Creating()},
		},
		"WidgetWithoutEndpoint": {
			reason: "A key of a widget that has no endpoint yet is created; its connection details have no endpoint (Observe adds it once the widget has one).",
			server: func(o *server.Options) { o.ProvisionDelay = time.Hour },
			widget: provisioningWidget,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{created: true, ready: xpv2.Creating()},
		},
		"NoDescription": {
			reason: "A key without a description is created without one.",
			widget: readyWidget,
			mods:   []mod{explicitName("k1"), forWidget(widgetName)},
			want:   want{created: true, ready: xpv2.Creating()},
		},
		"AlreadyExists": {
			reason:  "A name taken in the meantime is an error that says so.",
			widget:  readyWidget,
			seedKey: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{err: cmpopts.AnyError, mentions: []string{"already has a key named"}, ready: noReady},
		},
		"WidgetMissing": {
			reason: "A key of a widget that does not exist yet is a clear error; it is created once the widget exists.",
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{err: cmpopts.AnyError, mentions: []string{"widget w does not exist"}, ready: noReady},
		},
		"WidgetDeleting": {
			reason:       "Other API errors (here: the widget is being deleted) go through Check and are returned.",
			server:       func(o *server.Options) { o.DeleteDelay = time.Hour },
			widget:       readyWidget,
			deleteWidget: true,
			mods:         []mod{defaultName(), forWidget(widgetName)},
			want:         want{err: cmpopts.AnyError, checked: widgetapi.IsConflict, ready: noReady},
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
			initProvider := mg.GetWidgetKeyInitParameters().DeepCopy()
			keyName := meta.GetExternalName(mg)
			var w *widgetapi.Widget
			switch tc.widget {
			case readyWidget:
				w = seedWidget(t, api, widgetapi.StateReady, ownedWidget(mg))
			case provisioningWidget:
				w = seedWidget(t, api, widgetapi.StateProvisioning, ownedWidget(mg))
			case noWidget:
			}
			var seeded *widgetapi.Key
			if tc.seedKey {
				seeded = seedKey(t, api, keyName, "", ownership.Labels(mg, ""))
			}
			if tc.deleteWidget {
				if _, err := api.DeleteWidget(t.Context(), widgetName); err != nil {
					t.Fatal(err)
				}
			}
			if tc.exhaust {
				apitest.Exhaust(t, api)
			}
			rec := &fakes.Recorder{}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: rec, lost: tc.lost}

			got, err := e.Create(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nCreate(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			for _, f := range tc.want.mentions {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s\nCreate(...): error %q does not mention %q", tc.reason, err, f)
				}
			}
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			var wantEvents []event.Event
			for _, ev := range tc.want.events {
				ev.Message = strings.ReplaceAll(ev.Message, "{key}", keyName)
				wantEvents = append(wantEvents, ev)
			}
			if diff := cmp.Diff(wantEvents, rec.Events()); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(initProvider, mg.GetWidgetKeyInitParameters()); diff != "" {
				t.Errorf("%s\nCreate(...) changed spec.initProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if !tc.want.created {
				if diff := cmp.Diff(managed.ExternalCreation{}, got); diff != "" {
					t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			secret := got.ConnectionDetails[DetailKey]
			if len(secret) == 0 {
				t.Errorf("%s\nCreate(...): no key secret in the connection details", tc.reason)
			}
			want := managed.ExternalCreation{ConnectionDetails: managed.ConnectionDetails{
				DetailKey: secret, DetailKeyName: []byte(keyName), DetailWidget: []byte(widgetName),
			}}
			if w.Endpoint != "" {
				want.ConnectionDetails[DetailEndpoint] = []byte(w.Endpoint)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
			}
			k, err := api.GetKey(t.Context(), widgetName, keyName)
			if err != nil {
				t.Fatalf("%s\nthe created key cannot be read: %v", tc.reason, err)
			}
			if k.Description != tc.want.description {
				t.Errorf("%s\nkey description: want %q, got %q", tc.reason, tc.want.description, k.Description)
			}
			if diff := cmp.Diff(ownership.Labels(mg, ""), k.Labels); diff != "" {
				t.Errorf("%s\nkey labels: the key must carry the resource's ownership markers: -want, +got:\n%s", tc.reason, diff)
			}
			if seeded != nil && k.ID == seeded.ID {
				t.Errorf("%s\nthe key is still the lost one (ID %s): want a new key", tc.reason, k.ID)
			}
			if diff := cmp.Diff(commonv1beta1.WidgetKeyObservation{}, *mg.GetWidgetKeyObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider is left to Observe: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
