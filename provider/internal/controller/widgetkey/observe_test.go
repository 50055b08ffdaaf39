package widgetkey

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestObserve(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testObserve(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testObserve(t, newCluster) })
}

func testObserve[T commonv1beta1.WidgetKeyResource](t *testing.T, newMG func() T) {
	type want struct {
		exists bool
		// status says whether status.atProvider shows the key.
		status bool
		// endpoint says whether the widget's endpoint is a connection
		// detail.
		endpoint bool
		// recorded says whether the key's secret, as the connection
		// Secret holds it, is a connection detail: publishing the details
		// then changes nothing in the Secret.
		recorded bool
		err      error
		mentions []string
		checked  func(error) bool
		ready    xpv2.Condition
		// keyKept says whether the key still exists in the API afterwards.
		keyKept bool
		// lost says the key was found without its secret, for Create to
		// replace.
		lost bool
		// cache and live say whether each reader was consulted.
		cache, live bool
	}
	cases := map[string]struct {
		reason string
		server func(*server.Options)
		widget widgetSeed
		// key is the description of a key to seed under the resource's
		// external name; nil for none.
		key  *string
		mods []mod
		// cache and live are what each Secret reader finds.
		cache, live secretState
		// exhaust uses up the rate limit before Observe.
		exhaust bool
		// beforeGetKey runs between reading the widget and the key.
		beforeGetKey func(t *testing.T, api *widgetapi.Client)
		// later moves the provider's clock this far past the key's
		// creation.
		later time.Duration
		want  want
	}{
		"NoExternalName": {
			reason: "A resource without an external name has no key yet.",
			mods:   []mod{forWidget(widgetName)},
			want:   want{ready: noReady},
		},
		"InvalidExternalName": {
			reason: "An external name the API could never accept is an error saying what a valid name is.",
			mods:   []mod{explicitName("Bad_Key"), forWidget(widgetName)},
			want:   want{err: cmpopts.AnyError, mentions: []string{`"Bad_Key"`}, ready: noReady},
		},
		"WidgetNameUnresolved": {
			reason: "A key whose widget is not known yet is an error saying how to name it.",
			mods:   []mod{defaultName()},
			want:   want{err: cmpopts.AnyError, mentions: []string{"spec.forProvider.widgetName", "widgetNameRef"}, ready: noReady},
		},
		"WidgetNameUnresolvedWhileDeleting": {
			reason: "A key that never knew its widget can be deleted: it has no key.",
			mods:   []mod{defaultName(), deleted()},
			want:   want{ready: noReady},
		},
		"WidgetMissing": {
			reason: "A key of a widget that does not exist does not exist.",
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{ready: noReady},
		},
		"KeyMissing": {
			reason: "A key that does not exist is reported as such, so it is created.",
			widget: readyWidget,
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			want:   want{ready: noReady},
		},
		"SecretRecorded": {
			reason: "A key whose secret is in the connection Secret exists, is Ready, and publishes its name, widget, the widget's endpoint and the secret as the Secret holds it.",
			widget: readyWidget,
			key:    ptr.To("ci"),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretWithKey,
			want:   want{exists: true, status: true, endpoint: true, recorded: true, ready: xpv2.Available(), keyKept: true, cache: true},
		},
		"WidgetNotReady": {
			reason: "The endpoint is published only once the widget has one.",
			server: func(o *server.Options) { o.ProvisionDelay = time.Hour },
			widget: provisioningWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretWithKey,
			want:   want{exists: true, status: true, recorded: true, ready: xpv2.Available(), keyKept: true, cache: true},
		},
		"NoConnectionSecret": {
			reason: "A resource that writes no connection Secret has nothing to lose: the key exists as is.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"SecretLostDefaultName": {
			reason: "A key whose secret never reached the connection Secret is useless: under a defaulted name it is reported missing and marked lost, so Create replaces it; Observe itself changes nothing.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			want:   want{ready: noReady, lost: true, keyKept: true, cache: true, live: true},
		},
		"SecretLostLongAgo": {
			reason: "A key older than LostKeyWindow whose secret is in no connection Secret may be in use (the Secret was deleted, or a restore left it out): nothing is revoked, and the error says what is missing and what to do.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			later:  LostKeyWindow + time.Minute,
			want: want{
				err: cmpopts.AnyError, mentions: []string{"not in connection Secret", "nothing was revoked", "restore", "delete this WidgetKey"},
				ready: noReady, keyKept: true, cache: true, live: true,
			},
		},
		"SecretLostJustInWindow": {
			reason: "A key created within LostKeyWindow is the provider's own, lost when it stopped between creating and saving it: replaced.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			later:  LostKeyWindow - time.Minute,
			want:   want{ready: noReady, lost: true, keyKept: true, cache: true, live: true},
		},
		"SecretWithoutKeyDefaultName": {
			reason: "A connection Secret without the key's secret is as good as none.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretWithoutKey,
			live:   secretWithoutKey,
			want:   want{ready: noReady, lost: true, keyKept: true, cache: true, live: true},
		},
		"SecretLostExplicitName": {
			reason: "A key named explicitly is never revoked by the provider: an error says what to do.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{explicitName("imported-key"), forWidget(widgetName), writesSecret()},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"imported-key", "crossplane.io/external-name"},
				ready: noReady, keyKept: true, cache: true, live: true,
			},
		},
		"CacheLags": {
			reason: "A Secret the cache does not show yet but the API server has is not lost: the key is not rotated.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretAbsent,
			live:   secretWithKey,
			want:   want{exists: true, status: true, endpoint: true, recorded: true, ready: xpv2.Available(), keyKept: true, cache: true, live: true},
		},
		"ObserveOnly": {
			reason: "An observe-only resource never rotates a key, and does not look for its secret.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret(), observeOnlyPolicy()},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"NeverCreatedObserveOnly": {
			reason: "An observe-only resource reads its key even under the provider's name with no create started: it never creates one.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{chosenName(), forWidget(widgetName), writesSecret(), observeOnlyPolicy()},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"NeverCreatedDeleting": {
			reason: "A resource being deleted reads its key even with no create started, so that a key it made is revoked.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{chosenName(), forWidget(widgetName), writesSecret(), deleted()},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"Deleting": {
			reason: "A resource being deleted reports its key, whatever the Secret holds, so it is revoked.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret(), deleted()},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"CacheFails": {
			reason: "An error reading the connection Secret is returned; nothing is rotated.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretError,
			want:   want{err: errBoom, ready: noReady, keyKept: true, cache: true},
		},
		"LiveFails": {
			reason: "An error confirming a missing Secret with the API server is returned; nothing is rotated.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			live:   secretError,
			want:   want{err: errBoom, ready: noReady, keyKept: true, cache: true, live: true},
		},
		"GetWidgetRateLimited": {
			reason:  "A 429 reading the key's widget goes through Check and is returned.",
			server:  rateLimitedSlowProvisioning,
			widget:  provisioningWidget,
			key:     ptr.To(""),
			mods:    []mod{defaultName(), forWidget(widgetName), writesSecret()},
			exhaust: true,
			want:    want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady, keyKept: true},
		},
		"GetKeyRateLimited": {
			reason:       "A 429 reading the key goes through Check and is returned.",
			server:       rateLimitedSlowProvisioning,
			widget:       provisioningWidget,
			key:          ptr.To(""),
			mods:         []mod{defaultName(), forWidget(widgetName), writesSecret()},
			beforeGetKey: apitest.Exhaust,
			want:         want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady, keyKept: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.Tokens = map[string]string{apitest.TokenA: apitest.ProjectA, "seed-token": apitest.ProjectA}
			}), apitest.WithOptions(tc.server))
			seedAPI, api := env.Client(t, "seed-token"), env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			keyName := meta.GetExternalName(mg)
			var w *widgetapi.Widget
			switch tc.widget {
			case readyWidget:
				w = seedWidget(t, seedAPI, widgetapi.StateReady, ownedWidget(mg))
			case provisioningWidget:
				w = seedWidget(t, seedAPI, widgetapi.StateProvisioning, ownedWidget(mg))
			case noWidget:
			}
			var k *widgetapi.Key
			if tc.key != nil {
				k = seedKey(t, seedAPI, keyName, *tc.key, ownership.Labels(mg, ""))
			}
			if tc.exhaust {
				apitest.Exhaust(t, api)
			}
			var hooked API = api
			if tc.beforeGetKey != nil {
				hooked = &hookAPI{API: api, beforeGetKey: func() { tc.beforeGetKey(t, api) }}
			}
			cache, live := reader(tc.cache, nil), reader(tc.live, nil)
			rec := &fakes.Recorder{}
			e := &external[T]{api: hooked, cache: cache, live: live, record: rec}
			if tc.later != 0 && k != nil {
				at := k.CreatedAt.Add(tc.later)
				e.now = func() time.Time { return at }
			}

			got, err := e.Observe(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nObserve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			for _, f := range tc.want.mentions {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s\nObserve(...): error %q does not mention %q", tc.reason, err, f)
				}
			}
			apiError(t, tc.reason, err, tc.want.checked)

			want := managed.ExternalObservation{}
			wantStatus := commonv1beta1.WidgetKeyObservation{}
			if tc.want.exists {
				want = managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true,
					ConnectionDetails: managed.ConnectionDetails{DetailKeyName: []byte(keyName), DetailWidget: []byte(widgetName)}}
				if tc.want.endpoint {
					want.ConnectionDetails[DetailEndpoint] = []byte(w.Endpoint)
				}
				if tc.want.recorded {
					want.ConnectionDetails[DetailKey] = []byte("wks_recorded")
				}
			}
			if tc.want.status {
				wantStatus = commonv1beta1.WidgetKeyObservation{ID: k.ID, WidgetName: widgetName, Description: k.Description,
					CreatedAt: ptr.To(metav1.NewTime(k.CreatedAt.Truncate(time.Second)))}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(wantStatus, *mg.GetWidgetKeyObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if k != nil {
				if got := keyExists(t, seedAPI, keyName); got != tc.want.keyKept {
					t.Errorf("%s\nkey in the API afterwards: want %t, got %t", tc.reason, tc.want.keyKept, got)
				}
			}
			if e.lost != tc.want.lost {
				t.Errorf("%s\nlost: want %t, got %t", tc.reason, tc.want.lost, e.lost)
			}
			if events := rec.Events(); len(events) > 0 {
				t.Errorf("%s\nObserve emitted events %v, want none", tc.reason, events)
			}
			for _, r := range []struct {
				name   string
				reader *fakeReader
				want   bool
			}{{"cache", cache, tc.want.cache}, {"live", live, tc.want.live}} {
				var wantGets []types.NamespacedName
				if r.want {
					wantGets = []types.NamespacedName{secretKey(mg)}
				}
				if diff := cmp.Diff(wantGets, r.reader.gets); diff != "" {
					t.Errorf("%s\nSecrets read from the %s: -want, +got:\n%s", tc.reason, r.name, diff)
				}
			}
		})
	}
}
