package fn

import (
	"testing"

	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"github.com/google/go-cmp/cmp"

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
			reason: "Before anything exists a namespaced XR's status holds only its key count and connection Secret: unknown fields are left out, so they are removed from the XR.",
			x:      xwidget{flavour: FlavourNamespaced},
			obs:    observation{keys: []keyObservation{{index: 0}}},
			want:   map[string]any{"status": map[string]any{"keysReady": "0/1", "connectionSecretName": "web-connection"}},
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
