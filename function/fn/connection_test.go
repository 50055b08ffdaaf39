package fn

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

func TestConnectionDetails(t *testing.T) {
	widget := widgetObservation{exists: true, externalName: "team-a-web", atProvider: commonv1beta1.WidgetObservation{Endpoint: "https://w"}}
	key := func(i int, d resource.ConnectionDetails) keyObservation {
		return keyObservation{index: i, exists: true, details: d}
	}
	cases := map[string]struct {
		reason string
		obs    observation
		want   resource.ConnectionDetails
	}{
		"Nothing": {
			reason: "Before anything exists there are no connection details.",
			obs:    observation{keys: []keyObservation{{index: 0}}},
			want:   resource.ConnectionDetails{},
		},
		"WidgetOnly": {
			reason: "The widget's endpoint and name are connection details as soon as they are known.",
			obs:    observation{widget: widget},
			want:   resource.ConnectionDetails{"endpoint": []byte("https://w"), "widget": []byte("team-a-web")},
		},
		"Overlap": {
			reason: "During a rotation's overlap the key it replaced, still valid, is published as key-<i>-previous.",
			obs: observation{widget: widget, keys: []keyObservation{
				key(0, resource.ConnectionDetails{"key": []byte("new"), "keyName": []byte("n0-r1"), "previousKey": []byte("old"), "previousKeyName": []byte("n0")}),
			}},
			want: resource.ConnectionDetails{"endpoint": []byte("https://w"), "widget": []byte("team-a-web"),
				"key-0": []byte("new"), "key-0-name": []byte("n0-r1"), "key-0-previous": []byte("old"), "key-0-previous-name": []byte("n0")},
		},
		"Keys": {
			reason: "Each ready key contributes its key and name under its index; keys that are not ready contribute nothing.",
			obs: observation{widget: widget, keys: []keyObservation{
				key(0, resource.ConnectionDetails{"key": []byte("k0"), "keyName": []byte("n0"), "endpoint": []byte("https://w")}),
				key(1, resource.ConnectionDetails{"keyName": []byte("n1")}),
				key(2, resource.ConnectionDetails{"key": []byte("k2")}),
			}},
			want: resource.ConnectionDetails{
				"endpoint": []byte("https://w"), "widget": []byte("team-a-web"),
				"key-0": []byte("k0"), "key-0-name": []byte("n0"),
				"key-2": []byte("k2"),
			},
		},
		"EndpointFromKey": {
			reason: "While the widget's status has no endpoint, a key's endpoint is used.",
			obs: observation{widget: widgetObservation{exists: true}, keys: []keyObservation{
				key(0, resource.ConnectionDetails{"key": []byte("k0"), "endpoint": []byte("https://from-key")}),
			}},
			want: resource.ConnectionDetails{"endpoint": []byte("https://from-key"), "key-0": []byte("k0")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, connectionDetails(tc.obs)); diff != "" {
				t.Errorf("%s\nconnectionDetails(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPublishConnectionDetails(t *testing.T) {
	obs := observation{
		widget:       widgetObservation{exists: true, externalName: "w", atProvider: commonv1beta1.WidgetObservation{Endpoint: "https://w"}, ready: xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue}},
		keys:         []keyObservation{{index: 0, exists: true, details: resource.ConnectionDetails{"key": []byte("k0")}}},
		secretExists: true,
	}
	type want struct {
		xrDetails resource.ConnectionDetails
		secret    map[string]any
		ready     resource.Ready
	}
	cases := map[string]struct {
		reason  string
		flavour Flavour
		want    want
	}{
		"Namespaced": {
			reason:  "A namespaced XR's connection details go to its composed Secret, ready since it exists; the XR's own connection details, which Crossplane ignores for such XRs, are left as earlier steps set them.",
			flavour: FlavourNamespaced,
			want: want{
				xrDetails: resource.ConnectionDetails{"earlier": []byte("kept")},
				secret: map[string]any{
					"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
					"metadata": map[string]any{"name": "web-connection"},
					"data":     map[string]any{"endpoint": b64("https://w"), "widget": b64("w"), "key-0": b64("k0")},
				},
				ready: resource.ReadyTrue,
			},
		},
		"Legacy": {
			reason:  "A legacy XR's connection details are its own, added to those earlier steps set, for Crossplane to publish to the claim.",
			flavour: FlavourLegacy,
			want: want{
				xrDetails: resource.ConnectionDetails{"earlier": []byte("kept"), "endpoint": []byte("https://w"), "widget": []byte("w"), "key-0": []byte("k0")},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &outcome{
				composed: map[resource.Name]*resource.DesiredComposed{},
				xr:       &resource.Composite{Resource: composite.New(), ConnectionDetails: resource.ConnectionDetails{"earlier": []byte("kept")}},
			}
			if err := publishConnectionDetails(o, xwidget{flavour: tc.flavour}, settings{secretName: "web-connection"}, obs); err != nil {
				t.Fatalf("%s\npublishConnectionDetails(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.xrDetails, o.xr.ConnectionDetails); diff != "" {
				t.Errorf("%s\nXR connection details: -want, +got:\n%s", tc.reason, diff)
			}
			var gotSecret map[string]any
			var gotReady resource.Ready
			if cd, ok := o.composed[resourceConnectionSecret]; ok {
				gotSecret, gotReady = cd.Resource.Object, cd.Ready
			}
			if diff := cmp.Diff(tc.want.secret, gotSecret); diff != "" {
				t.Errorf("%s\nconnection Secret: -want, +got:\n%s", tc.reason, diff)
			}
			if gotReady != tc.want.ready {
				t.Errorf("%s\nconnection Secret readiness: want %q, got %q", tc.reason, tc.want.ready, gotReady)
			}
		})
	}
}
