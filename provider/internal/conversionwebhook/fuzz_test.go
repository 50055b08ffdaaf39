package conversionwebhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzConversionReview posts any body to the conversion webhook, as any
// client that reaches its port can: it must answer 200 with a response to
// the review, or refuse with 400 or 413, and never panic.
func FuzzConversionReview(f *testing.F) {
	mux := webhookMux(f)
	for _, seed := range []string{
		"", "{}", "null", `{"request":null}`, `{"request":{}}`,
		reviewHead + reviewTail,
		`{"request":{"uid":"1","desiredAPIVersion":"widget.m.widgetco.io/v1beta1","objects":[{"apiVersion":"widget.m.widgetco.io/v1alpha1","kind":"Widget","metadata":{"name":"w","annotations":{"internal.upjet.crossplane.io/field-conversions":"{"}}}]}}`,
		`{"request":{"uid":"1","desiredAPIVersion":"widget.m.widgetco.io/v1alpha1","objects":[{"apiVersion":"widget.m.widgetco.io/v1beta1","kind":"WidgetKey","metadata":{"name":"k"},"spec":{"forProvider":{"widgetName":1}}}]}}`,
		`{"request":{"uid":"1","desiredAPIVersion":"v1","objects":[{"apiVersion":"v1","kind":"Secret"}]}}`,
		`{"request":{"uid":"1","desiredAPIVersion":"widget.m.widgetco.io/v1alpha1","objects":[1,"x",null,{}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return
		case http.StatusOK:
		default:
			t.Fatalf("POST /convert %q: status %d", body, rec.Code)
		}
		in, out := apix.ConversionReview{}, apix.ConversionReview{}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("POST /convert %q: status 200 without a ConversionReview response (%v): %s", body, err, rec.Body.String())
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
			t.Fatalf("POST /convert %q: status 200 for a body that is not a ConversionReview request (%v)", body, err)
		}
		if out.Response.UID != in.Request.UID {
			t.Fatalf("POST /convert %q: response UID %q, want %q", body, out.Response.UID, in.Request.UID)
		}
		if out.Response.Result.Status == metav1.StatusSuccess && len(out.Response.ConvertedObjects) != len(in.Request.Objects) {
			t.Fatalf("POST /convert %q: %d objects converted of %d", body, len(out.Response.ConvertedObjects), len(in.Request.Objects))
		}
	})
}

// FuzzAnnotationToV1alpha1 sends kube-apiserver's review of a stored
// v1beta1 Widget, whose field-conversions annotation a tenant wrote, to
// v1alpha1: whatever the annotation holds, the conversion must succeed (a
// failure fails every v1alpha1 list and watch in the cluster).
func FuzzAnnotationToV1alpha1(f *testing.F) {
	mux := webhookMux(f)
	for _, seed := range []string{"", "{", "[]", "null", `{"spec.initProvider.size":"huge"}`, `{"spec.initProvider[":1}`, `{"spec.initProvider.labels":"x"}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, annotation string) {
		a, err := json.Marshal(annotation)
		if err != nil {
			t.Skip("not a JSON string")
		}
		object := `{"apiVersion":"widget.m.widgetco.io/v1beta1","kind":"Widget","metadata":{"name":"w","namespace":"team-a","annotations":{"internal.upjet.crossplane.io/field-conversions":` + string(a) + `}},` +
			`"spec":{"forProvider":{"size":"small"},"initProvider":{"region":"eu-west-1","labels":{"team":"a"}}}}`
		body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"widget.m.widgetco.io/v1alpha1","objects":[` + object + `]}}`
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader([]byte(body))))
		out := apix.ConversionReview{}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("annotation %q: status %d without a ConversionReview response: %s", annotation, rec.Code, rec.Body.String())
		}
		if out.Response.Result.Status != metav1.StatusSuccess || len(out.Response.ConvertedObjects) != 1 {
			t.Fatalf("annotation %q: want the Widget converted, got %+v", annotation, out.Response.Result)
		}
		got := struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}{}
		if err := json.Unmarshal(out.Response.ConvertedObjects[0].Raw, &got); err != nil {
			t.Fatal(err)
		}
		if want := `{"spec.initProvider.labels":{"team":"a"}}`; got.Metadata.Annotations["internal.upjet.crossplane.io/field-conversions"] != want {
			t.Fatalf("annotation %q: v1alpha1 annotations %v, want only %s", annotation, got.Metadata.Annotations, want)
		}
	})
}
