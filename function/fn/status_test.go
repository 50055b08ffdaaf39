package fn

import (
	"testing"
	"time"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

func TestSetStatus(t *testing.T) {
	ready := observation{
		widget: widgetObservation{
			exists: true, externalName: "team-a-web", region: "us-east-1",
			atProvider: commonv1beta1.WidgetObservation{State: "Ready", Endpoint: "https://w", Region: "us-east-1"},
		},
		keys: []keyObservation{{index: 0, exists: true, details: resource.ConnectionDetails{"key": []byte("k")}}, {index: 1}},
	}
	cases := map[string]struct {
		reason string
		x      xwidget
		obs    observation
		want   map[string]any
	}{
		"NamespacedNew": {
			reason: "Before anything exists a namespaced XR's status holds only its connection Secret: unknown fields are left out, so they are removed from the XR.",
			x:      xwidget{flavour: FlavourNamespaced},
			obs:    observation{keys: []keyObservation{{index: 0}}},
			want:   map[string]any{"status": map[string]any{"connectionSecretName": "web-connection"}},
		},
		"LegacyWidgetCreating": {
			reason: "Until the Widget API has the widget a legacy XR's status holds nothing: the keys wait for the widget, the KeysReady condition says so, and every status change would cost the XR and its claim a reconcile.",
			x:      xwidget{flavour: FlavourLegacy},
			obs:    observation{widget: widgetObservation{exists: true, region: "us-east-1"}, keys: []keyObservation{{index: 0, exists: true}}},
			want:   map[string]any{},
		},
		"LegacyWidgetProvisioning": {
			reason: "Once the Widget API has the widget, the XR counts the keys, none ready yet, with the widget's name and state.",
			x:      xwidget{flavour: FlavourLegacy},
			obs: observation{
				widget: widgetObservation{exists: true, externalName: "team-a-web", atProvider: commonv1beta1.WidgetObservation{State: "Creating"}},
				keys:   []keyObservation{{index: 0, exists: true}},
			},
			want: map[string]any{"status": map[string]any{"widgetState": "Creating", "externalName": "team-a-web", "keysReady": "0/1"}},
		},
		"NamespacedReady": {
			reason: "A namespaced XR's status holds the widget's endpoint, state, name and region.",
			x:      xwidget{flavour: FlavourNamespaced},
			obs:    ready,
			want: map[string]any{"status": map[string]any{
				"endpoint": "https://w", "widgetState": "Ready", "externalName": "team-a-web", "region": "us-east-1",
				"keysReady": "1/2", "connectionSecretName": "web-connection",
			}},
		},
		"Drift": {
			reason: "Once the provider restored the widget, the XR says how often, when last and what: the app team sees changes made behind its back.",
			x:      xwidget{flavour: FlavourLegacy},
			obs: func() observation {
				o := ready
				o.widget.drift = &commonv1beta1.DriftRepairs{Count: 3, LastAt: metav1.NewTime(time.Date(2026, 11, 29, 18, 0, 0, 0, time.FixedZone("CET", 3600))), LastChange: `size: want "large", have "small"`}
				return o
			}(),
			want: map[string]any{"status": map[string]any{
				"endpoint": "https://w", "widgetState": "Ready", "externalName": "team-a-web", "region": "us-east-1", "keysReady": "1/2",
				"drift": map[string]any{"repairs": int64(3), "lastRepairAt": "2026-11-29T17:00:00Z", "lastChange": `size: want "large", have "small"`},
			}},
		},
		"Legacy": {
			reason: "A legacy XR has no connection Secret of its own to report.",
			x:      xwidget{flavour: FlavourLegacy},
			obs:    ready,
			want: map[string]any{"status": map[string]any{
				"endpoint": "https://w", "widgetState": "Ready", "externalName": "team-a-web", "region": "us-east-1", "keysReady": "1/2",
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := &resource.Composite{Resource: composite.New()}
			if err := setStatus(xr, tc.x, settings{secretName: "web-connection"}, tc.obs); err != nil {
				t.Fatalf("%s\nsetStatus(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, xr.Resource.Object); diff != "" {
				t.Errorf("%s\nsetStatus(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
