package widgetkey

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestOtherControlPlane: a WidgetKey of control plane "b" whose widget control
// plane "a" manages (a restore or migration beside the original) creates,
// rotates and revokes none of its keys; the original's WidgetKey does.
func TestOtherControlPlane(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testOtherControlPlane(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testOtherControlPlane(t, newCluster) })
}

func testOtherControlPlane[T commonv1beta1.WidgetKeyResource](t *testing.T, newMG func() T) {
	cases := map[string]struct {
		reason string
		mods   []mod
		// widgetCP is the widget's control plane label.
		widgetCP string
		// create calls Create after Observe, as the reconciler would when
		// Observe found no key.
		create  bool
		wantErr bool
		// wantKey says the key exists afterwards.
		wantKey  bool
		wantKeys int
		events   []event.Reason
	}{
		"Observe": {
			reason:   "The key of another control plane's widget is not managed here: Observe says so, and the key stays.",
			mods:     []mod{explicitName("k"), forWidget(widgetName), writesSecret()},
			widgetCP: "a", wantErr: true, wantKey: true, wantKeys: 1,
		},
		"Deleted": {
			reason:   "Deleting this control plane's WidgetKey revokes nothing of another control plane's widget.",
			mods:     []mod{explicitName("k"), forWidget(widgetName), writesSecret(), deleted()},
			widgetCP: "a", wantKey: true, wantKeys: 1, events: []event.Reason{ReasonNotRevoked},
		},
		"Create": {
			reason:   "Create hands out no secret for another control plane's widget, even when Observe was skipped.",
			mods:     []mod{defaultName(), forWidget(widgetName), writesSecret()},
			widgetCP: "a", create: true, wantErr: true, wantKey: true, wantKeys: 1,
		},
		"OwnControlPlane": {
			reason:   "The widget's own control plane creates keys as always.",
			mods:     []mod{defaultName(), forWidget(widgetName), writesSecret()},
			widgetCP: "b", create: true, wantKey: true, wantKeys: 2,
		},
		"ObserveOnly": {
			reason:   "An Observe-only WidgetKey only reads, whoever manages the widget.",
			mods:     []mod{explicitName("k"), forWidget(widgetName), observeOnlyPolicy()},
			widgetCP: "a", wantKey: true, wantKeys: 1,
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
			labels := ownedWidget(mg)
			labels[ownership.ControlPlaneLabel] = tc.widgetCP
			seedWidget(t, api, widgetapi.StateReady, labels)
			keyLabels := ownership.Labels(mg, "a")
			seedKey(t, api, "k", "", keyLabels)

			rec := &fakes.Recorder{}
			e := &external[T]{api: env.Client(t, apitest.TokenA), cache: reader(secretWithKey, nil), live: reader(secretWithKey, nil), record: rec, now: time.Now, cp: "b"}
			_, err := e.Observe(t.Context(), mg)
			if tc.create && err == nil {
				_, err = e.Create(t.Context(), mg)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nwant error %t, got %v", tc.reason, tc.wantErr, err)
			}
			if err != nil && !strings.Contains(err.Error(), "managed by control plane a") {
				t.Errorf("%s\nerror %q does not say which control plane manages the widget", tc.reason, err)
			}
			if got := keyExists(t, api, "k"); got != tc.wantKey {
				t.Errorf("%s\nkey k exists afterwards: want %t, got %t", tc.reason, tc.wantKey, got)
			}
			keys, err := api.ListKeys(t.Context(), widgetName)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys.Items) != tc.wantKeys {
				t.Errorf("%s\nwant %d keys afterwards, got %d", tc.reason, tc.wantKeys, len(keys.Items))
			}
			var reasons []event.Reason
			for _, ev := range rec.Events() {
				reasons = append(reasons, ev.Reason)
			}
			if len(reasons) != len(tc.events) || len(reasons) > 0 && reasons[0] != tc.events[0] {
				t.Errorf("%s\nevents: want %v, got %v", tc.reason, tc.events, reasons)
			}
		})
	}
}
