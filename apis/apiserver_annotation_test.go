package apis_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// testAnnotation writes upjet's field-conversions annotation where a tenant
// can: through v1beta1, which stores it unchecked (CRD rules cannot read
// annotations), and through v1alpha1, whose schema does not see what it
// carries.
func testAnnotation(t *testing.T, c client.Client) {
	t.Run("MalformedThroughV1beta1", func(t *testing.T) { testMalformedAnnotation(t, c) })
	t.Run("InvalidValuesThroughV1alpha1", func(t *testing.T) { testAnnotationValues(t, c) })
}

// testMalformedAnnotation stores a v1beta1 Widget with a field-conversions
// annotation that is not JSON and lists Widgets in v1alpha1, in its
// namespace and cluster-wide: the lists must succeed, and show the Widget
// with the annotation its v1beta1 fields give.
func testMalformedAnnotation(t *testing.T, c client.Client) {
	ctx := context.Background()
	w := nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{
		ForProvider:  commonv1beta1.WidgetParameters{Size: ptr.To("small")},
		InitProvider: commonv1beta1.WidgetInitParameters{Description: ptr.To("first")},
	})
	w.SetName("malformed-annotation")
	w.SetAnnotations(map[string]string{fieldConversions: "{"})
	if err := c.Create(ctx, w); err != nil {
		t.Fatalf("Create() in v1beta1: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, w) })

	want := map[string]string{fieldConversions: `{"spec.initProvider.description":"first"}`}
	for scope, opts := range map[string][]client.ListOption{"Namespace": {client.InNamespace(testNamespace)}, "Cluster": nil} {
		l := &namespacedv1alpha1.WidgetList{}
		if err := c.List(ctx, l, opts...); err != nil {
			t.Fatalf("One v1beta1 Widget with a malformed %s annotation should not break v1alpha1 lists.\nList() in v1alpha1 (%s): %v", fieldConversions, scope, err)
		}
		found := false
		for _, i := range l.Items {
			if i.GetName() != w.GetName() {
				continue
			}
			found = true
			if diff := cmp.Diff(want, i.GetAnnotations()); diff != "" {
				t.Errorf("The v1alpha1 view should carry the annotation built from v1beta1's fields, not the stored one.\nannotations (%s): -want, +got:\n%s", scope, diff)
			}
		}
		if !found {
			t.Errorf("List() in v1alpha1 (%s): the Widget %s is missing", scope, w.GetName())
		}
	}
}

// testAnnotationValues writes, for each value v1beta1's schema refuses in
// initProvider, a v1beta1 Widget with it, which the CRD refuses, and a
// v1alpha1 Widget carrying it in the field-conversions annotation, which the
// conversion webhook must refuse too.
func testAnnotationValues(t *testing.T, c client.Client) {
	cases := map[string]struct {
		reason string
		init   commonv1beta1.WidgetInitParameters
		// wantBeta and wantAlpha are parts of the refusals of the v1beta1
		// and the v1alpha1 write, or "" where the write must be accepted.
		wantBeta  string
		wantAlpha string
	}{
		"Valid": {
			reason: "Values v1beta1 accepts should be accepted through the annotation too.",
			init:   commonv1beta1.WidgetInitParameters{Size: ptr.To("large"), Labels: map[string]string{"team": strings.Repeat("é", 63)}, Description: ptr.To("tab\tnewline\n")},
		},
		"Size": {
			reason:    "A size outside the enum should be refused.",
			init:      commonv1beta1.WidgetInitParameters{Size: ptr.To("huge")},
			wantBeta:  "Unsupported value",
			wantAlpha: "spec.initProvider.size: Unsupported value",
		},
		"ReservedLabel": {
			reason:    "A label under widgetco.io/ should be refused.",
			init:      commonv1beta1.WidgetInitParameters{Labels: map[string]string{"widgetco.io/owner": "team-b"}},
			wantBeta:  ruleLabelKeysReserved.Message,
			wantAlpha: "spec.initProvider.labels[widgetco.io/owner]",
		},
		"LabelValue": {
			reason:    "A label value of 64 characters should be refused.",
			init:      commonv1beta1.WidgetInitParameters{Labels: map[string]string{"team": strings.Repeat("a", 64)}},
			wantBeta:  ruleLabelValues.Message,
			wantAlpha: "spec.initProvider.labels[team]: Too long",
		},
		"DescriptionControlCharacter": {
			reason:    "A description with a control character should be refused.",
			init:      commonv1beta1.WidgetInitParameters{Description: ptr.To("carriage\rreturn")},
			wantBeta:  ruleDescriptionPrintable.Message,
			wantAlpha: "spec.initProvider.description: Invalid value",
		},
		"DescriptionLength": {
			reason:    "A description of 257 characters should be refused.",
			init:      commonv1beta1.WidgetInitParameters{Description: ptr.To(strings.Repeat("d", 257))},
			wantBeta:  "Too long",
			wantAlpha: "spec.initProvider.description: Too long",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			beta := nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}, InitProvider: tc.init})
			beta.SetName("annotation-beta-" + strings.ToLower(name))
			checkWrite(t, tc.reason, "v1beta1", c.Create(ctx, beta), tc.wantBeta)

			fields := map[string]any{}
			if tc.init.Size != nil {
				fields["spec.initProvider.size"] = *tc.init.Size
			}
			if tc.init.Labels != nil {
				fields["spec.initProvider.labels"] = tc.init.Labels
			}
			if tc.init.Description != nil {
				fields["spec.initProvider.description"] = *tc.init.Description
			}
			a, err := json.Marshal(fields)
			if err != nil {
				t.Fatal(err)
			}
			alpha := nsWidget(commonv1alpha1.WidgetParameters{Size: ptr.To("small")})
			alpha.SetName("annotation-alpha-" + strings.ToLower(name))
			alpha.SetAnnotations(map[string]string{fieldConversions: string(a)})
			checkWrite(t, tc.reason, "v1alpha1", c.Create(ctx, alpha), tc.wantAlpha)
			if tc.wantAlpha != "" {
				return
			}
			got := &namespacedv1beta1.Widget{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(alpha), got); err != nil {
				t.Fatalf("Get() in v1beta1: %v", err)
			}
			if diff := cmp.Diff(tc.init, got.Spec.InitProvider); diff != "" {
				t.Errorf("%s\nstored initProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(map[string]string(nil), got.GetAnnotations()); diff != "" {
				t.Errorf("%s\nstored annotations: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func checkWrite(t *testing.T, reason, version string, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("%s\nCreate() in %s: want the write accepted, got: %v", reason, version, err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Errorf("%s\nCreate() in %s: want the write refused with %q, got: %v", reason, version, wantErr, err)
	}
}

// A reviewLog records the largest ConversionReview a webhook handler served.
type reviewLog struct {
	mu         sync.Mutex
	maxObjects int
	maxBytes   int
	reviews    int
}

func (l *reviewLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review := struct {
			Request struct {
				Objects []json.RawMessage `json:"objects"`
			} `json:"request"`
		}{}
		_ = json.Unmarshal(body, &review)
		l.mu.Lock()
		l.reviews++
		l.maxObjects = max(l.maxObjects, len(review.Request.Objects))
		l.maxBytes = max(l.maxBytes, len(body))
		l.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// testReviewSize reads many objects in v1alpha1 in every way a client can
// (a list from the watch cache, a paginated list from etcd, a watch from the
// start) and checks the largest ConversionReview kube-apiserver sent: it
// converts each object in a review of its own. The provider's webhook limits
// (conversionwebhook.DefaultLimits: 1000 objects, 4 MiB) rely on it.
func testReviewSize(t *testing.T, c client.WithWatch, reviews *reviewLog) {
	ctx := context.Background()
	for i := range 30 {
		w := nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}})
		w.SetName(fmt.Sprintf("review-size-%d", i))
		if err := c.Create(ctx, w); err != nil {
			t.Fatalf("Create(): %v", err)
		}
	}
	l := &namespacedv1alpha1.WidgetList{}
	if err := c.List(ctx, l); err != nil {
		t.Fatalf("List() in v1alpha1: %v", err)
	}
	n := len(l.Items)
	for cont := ""; ; {
		page := &namespacedv1alpha1.WidgetList{}
		if err := c.List(ctx, page, client.Limit(7), client.Continue(cont)); err != nil {
			t.Fatalf("List() in v1alpha1, paginated: %v", err)
		}
		if cont = page.GetContinue(); cont == "" {
			break
		}
	}
	wi, err := c.Watch(ctx, &namespacedv1alpha1.WidgetList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	if err != nil {
		t.Fatalf("Watch() in v1alpha1: %v", err)
	}
	for range n {
		<-wi.ResultChan()
	}
	wi.Stop()

	reviews.mu.Lock()
	defer reviews.mu.Unlock()
	t.Logf("%d v1alpha1 Widgets listed and watched; %d ConversionReviews in all, the largest of %d objects and %d bytes", n, reviews.reviews, reviews.maxObjects, reviews.maxBytes)
	if n < 30 {
		t.Errorf("List() in v1alpha1: %d Widgets, want at least 30", n)
	}
	if reviews.maxObjects != 1 {
		t.Errorf("kube-apiserver sent a ConversionReview of %d objects, want 1: the webhook's limits assume one object per review", reviews.maxObjects)
	}
}
