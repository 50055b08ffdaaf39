package widgetkey

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestDelete(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testDelete(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testDelete(t, newCluster) })
}

func testDelete[T commonv1beta1.WidgetKeyResource](t *testing.T, newMG func() T) {
	type want struct {
		err     error
		checked func(error) bool
		// calls is the number of Widget API calls Delete makes.
		calls int32
	}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		seedKey bool
		mods    []mod
		// notRevocable: Observe did not find the key this resource's to
		// revoke.
		notRevocable bool
		exhaust      bool
		want         want
	}{
		"Exists": {
			reason:  "Deleting a key revokes it.",
			seedKey: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{calls: 1},
		},
		"Missing": {
			reason: "A key that is already gone is deleted: success.",
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{calls: 1},
		},
		"NotRevocable": {
			reason:       "A key Observe did not find this resource's to revoke is left alone, whatever Delete is asked.",
			seedKey:      true,
			mods:         []mod{defaultName(), forWidget(widgetName)},
			notRevocable: true,
		},
		"WidgetNameUnresolved": {
			reason: "A key that never knew its widget has nothing to revoke, and calls nothing.",
			mods:   []mod{defaultName()},
		},
		"RateLimited": {
			reason:  "A 429 goes through Check and is returned.",
			server:  apitest.RateLimited,
			seedKey: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			exhaust: true,
			want:    want{err: cmpopts.AnyError, checked: isRateLimited, calls: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.Tokens = map[string]string{apitest.TokenA: apitest.ProjectA, "seed-token": apitest.ProjectA}
				o.ProvisionDelay = time.Hour
			}), apitest.WithOptions(tc.server))
			seedAPI := env.Client(t, "seed-token")
			var calls atomic.Int32
			api := env.Client(t, apitest.TokenA, widgetapi.WithObserver(func(string, int, time.Duration) { calls.Add(1) }))
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			deleted()(mg)
			keyName := meta.GetExternalName(mg)
			seedWidget(t, seedAPI, widgetapi.StateProvisioning, ownedWidget(mg))
			if tc.seedKey {
				seedKey(t, seedAPI, keyName, "", ownership.Labels(mg, ""))
			}
			if tc.exhaust {
				apitest.Exhaust(t, api)
				calls.Store(0)
			}
			e := &external[T]{api: api, record: event.NewNopRecorder(), revocable: !tc.notRevocable}

			got, err := e.Delete(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nDelete(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(managed.ExternalDelete{}, got); diff != "" {
				t.Errorf("%s\nDelete(...): -want, +got:\n%s", tc.reason, diff)
			}
			if got := calls.Load(); got != tc.want.calls {
				t.Errorf("%s\nWidget API calls: want %d, got %d", tc.reason, tc.want.calls, got)
			}
			if want := tc.notRevocable; tc.seedKey && err == nil && keyExists(t, seedAPI, keyName) != want {
				t.Errorf("%s\nthe key exists after Delete: want %t, got %t", tc.reason, want, !want)
			}
		})
	}
}
