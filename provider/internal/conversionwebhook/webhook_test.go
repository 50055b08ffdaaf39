package conversionwebhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/widgetco/crossplane-widget/apis"
)

// TestConvert sends ConversionReviews, as kube-apiserver does, to the
// webhook server Setup configures, and checks the converted objects.
func TestConvert(t *testing.T) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{})
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: s, WebhookServer: srv, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr); err != nil {
		t.Fatalf("Setup(): %v", err)
	}

	cases := map[string]struct {
		reason  string
		desired string
		object  string
		want    string
		failed  bool
	}{
		"NamespacedWidgetToBeta": {
			reason:  "A v1alpha1 Widget's forProvider.region should become v1beta1's initProvider.region.",
			desired: "widget.m.widgetco.io/v1beta1",
			object:  `{"apiVersion":"widget.m.widgetco.io/v1alpha1","kind":"Widget","metadata":{"name":"w","namespace":"a"},"spec":{"forProvider":{"size":"small","region":"eu-west-1"}}}`,
			want:    `{"apiVersion":"widget.m.widgetco.io/v1beta1","kind":"Widget","metadata":{"name":"w","namespace":"a"},"spec":{"forProvider":{"size":"small"},"initProvider":{"region":"eu-west-1"}},"status":{"atProvider":{}}}`,
		},
		"ClusterWidgetKeyToAlpha": {
			reason:  "A v1beta1 WidgetKey's initProvider.description should become v1alpha1's forProvider.description.",
			desired: "widget.widgetco.io/v1alpha1",
			object:  `{"apiVersion":"widget.widgetco.io/v1beta1","kind":"WidgetKey","metadata":{"name":"k"},"spec":{"forProvider":{"widgetName":"w"},"initProvider":{"description":"ci"}}}`,
			want:    `{"apiVersion":"widget.widgetco.io/v1alpha1","kind":"WidgetKey","metadata":{"name":"k"},"spec":{"forProvider":{"widgetName":"w","description":"ci"}},"status":{"atProvider":{}}}`,
		},
		"MalformedAnnotation": {
			reason:  "An object whose field-conversions annotation is not JSON should fail the conversion with a message, not lose fields.",
			desired: "widget.m.widgetco.io/v1beta1",
			object:  `{"apiVersion":"widget.m.widgetco.io/v1alpha1","kind":"Widget","metadata":{"name":"w","namespace":"a","annotations":{"internal.upjet.crossplane.io/field-conversions":"{"}},"spec":{"forProvider":{}}}`,
			failed:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			review := apix.ConversionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
				Request:  &apix.ConversionRequest{UID: "1", DesiredAPIVersion: tc.desired, Objects: []runtime.RawExtension{{Raw: []byte(tc.object)}}},
			}
			body, err := json.Marshal(review)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			srv.WebhookMux().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
			if rec.Code != http.StatusOK {
				t.Fatalf("%s\nPOST /convert: status %d: %s", tc.reason, rec.Code, rec.Body.String())
			}
			got := apix.ConversionReview{}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if tc.failed {
				if got.Response.Result.Status != metav1.StatusFailure || got.Response.Result.Message == "" {
					t.Errorf("%s\nresult: want a Failure with a message, got %+v", tc.reason, got.Response.Result)
				}
				return
			}
			if got.Response.Result.Status != metav1.StatusSuccess || len(got.Response.ConvertedObjects) != 1 {
				t.Fatalf("%s\nresult: want one converted object, got %+v", tc.reason, got.Response)
			}
			var want, have map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got.Response.ConvertedObjects[0].Raw, &have); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, have); diff != "" {
				t.Errorf("%s\nconverted object: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// BenchmarkConversionReview measures the webhook as kube-apiserver uses it:
// one ConversionReview of n v1beta1 Widgets to v1alpha1 (a list or watch of
// n objects), JSON in and out, through the handler Setup registers.
func BenchmarkConversionReview(b *testing.B) {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{})
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: s, WebhookServer: srv, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := Setup(mgr); err != nil {
		b.Fatal(err)
	}
	const object = `{"apiVersion":"widget.m.widgetco.io/v1beta1","kind":"Widget","metadata":{"name":"w-%d","namespace":"team-a","annotations":{"crossplane.io/external-name":"team-a-w-%d"}},` +
		`"spec":{"providerConfigRef":{"kind":"ClusterProviderConfig","name":"default"},"forProvider":{"size":"medium","labels":{"team":"a","env":"prod"},"description":"XWidget team-a/web"},"initProvider":{"region":"us-east-1","size":"small"}},` +
		`"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-11-25T10:00:00Z"},{"type":"Synced","status":"True","reason":"ReconcileSuccess","lastTransitionTime":"2026-11-25T10:00:00Z"}],` +
		`"atProvider":{"id":"w-1","state":"Ready","endpoint":"https://w.example.com","size":"medium","region":"us-east-1","generation":3}}}`
	for _, n := range []int{1, 1000} {
		objs := make([]runtime.RawExtension, n)
		for i := range objs {
			objs[i] = runtime.RawExtension{Raw: []byte(fmt.Sprintf(object, i, i))}
		}
		body, err := json.Marshal(apix.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
			Request:  &apix.ConversionRequest{UID: "1", DesiredAPIVersion: "widget.m.widgetco.io/v1alpha1", Objects: objs},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Objects=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				srv.WebhookMux().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"status":"Success"`)) {
					b.Fatalf("status %d: %.300s", rec.Code, rec.Body.String())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/object")
		})
	}
}
