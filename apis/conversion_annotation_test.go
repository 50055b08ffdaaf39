package apis_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crossplane/upjet/v2/pkg/config/conversion"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// TestHubAnnotationIgnored converts v1beta1 objects that carry a
// field-conversions annotation someone wrote through v1beta1. No conversion
// puts one on a v1beta1 object, and whatever it holds, the conversion to
// v1alpha1 must neither fail on it (one such object would fail every
// v1alpha1 list and watch) nor copy it: the v1alpha1 annotation is built from
// the v1beta1 fields alone.
func TestHubAnnotationIgnored(t *testing.T) {
	initProvider := commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("large")}
	cases := map[string]struct {
		reason     string
		annotation string
	}{
		"NotJSON": {
			reason:     "An annotation that is not JSON should be ignored.",
			annotation: "{",
		},
		"NotAnObject": {
			reason:     "An annotation that is JSON but not an object should be ignored.",
			annotation: `["spec.initProvider.size"]`,
		},
		"ForgedValues": {
			reason:     "An annotation with values v1beta1 refuses should not reach the v1alpha1 object.",
			annotation: `{"spec.initProvider.size":"huge","spec.initProvider.labels":{"widgetco.io/owner":"team-b"}}`,
		},
		"BadPath": {
			reason:     "An annotation whose keys are not field paths should be ignored.",
			annotation: `{"spec.initProvider[":"x"}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hub := &namespacedv1beta1.Widget{
				ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "team-a", Annotations: map[string]string{conversion.AnnotationKey: tc.annotation, "team": "a"}},
				Spec:       namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}, InitProvider: initProvider},
			}
			got := &namespacedv1alpha1.Widget{}
			if err := got.ConvertFrom(hub); err != nil {
				t.Fatalf("%s\nConvertFrom(): %v", tc.reason, err)
			}
			want := map[string]string{conversion.AnnotationKey: `{"spec.initProvider.size":"large"}`, "team": "a"}
			if diff := cmp.Diff(want, got.GetAnnotations()); diff != "" {
				t.Errorf("%s\nv1alpha1 annotations: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.annotation, hub.GetAnnotations()[conversion.AnnotationKey]); diff != "" {
				t.Errorf("%s\nConvertFrom() changed the hub: -want, +got:\n%s", tc.reason, diff)
			}

			key := &clusterv1alpha1.WidgetKey{}
			keyHub := &clusterv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Name: "k", Annotations: map[string]string{conversion.AnnotationKey: tc.annotation}}}
			if err := key.ConvertFrom(keyHub); err != nil {
				t.Fatalf("%s\nWidgetKey ConvertFrom(): %v", tc.reason, err)
			}
			if diff := cmp.Diff(map[string]string(nil), key.GetAnnotations()); diff != "" {
				t.Errorf("%s\nv1alpha1 WidgetKey annotations: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSpokeAnnotationValidated converts v1alpha1 Widgets whose
// field-conversions annotation carries v1beta1's initProvider size, labels
// and description. The API server validates a v1alpha1 write against
// v1alpha1's schema, which does not see the annotation: the conversion to
// v1beta1, the storage version, must refuse what v1beta1's schema would.
func TestSpokeAnnotationValidated(t *testing.T) {
	labels := func(n int) map[string]any {
		l := map[string]any{}
		for i := range n {
			l["l"+strings.Repeat("x", i)] = "v"
		}
		return l
	}
	cases := map[string]struct {
		reason string
		fields map[string]any
		// wantErr is part of the error, or "" if the conversion must
		// succeed.
		wantErr string
	}{
		"Valid": {
			reason: "Values at v1beta1's limits should be accepted.",
			fields: map[string]any{
				"spec.initProvider.size":        "medium",
				"spec.initProvider.labels":      labels(31),
				"spec.initProvider.description": strings.Repeat("é", 254) + "\t\n",
			},
		},
		"LabelValueAtLimit": {
			reason: "A label value of 63 characters (126 bytes) should be accepted.",
			fields: map[string]any{"spec.initProvider.labels": map[string]any{"team": strings.Repeat("é", 63)}},
		},
		"SizeNotInEnum": {
			reason:  "A size other than small, medium or large should be refused.",
			fields:  map[string]any{"spec.initProvider.size": "huge"},
			wantErr: "spec.initProvider.size: Unsupported value",
		},
		"ReservedLabel": {
			reason:  "A label under widgetco.io/, the provider's ownership marker, should be refused.",
			fields:  map[string]any{"spec.initProvider.labels": map[string]any{"widgetco.io/owner": "team-b"}},
			wantErr: "spec.initProvider.labels[widgetco.io/owner]: Invalid value",
		},
		"LabelKeyPattern": {
			reason:  "A label key with an upper-case letter should be refused.",
			fields:  map[string]any{"spec.initProvider.labels": map[string]any{"Team": "a"}},
			wantErr: "spec.initProvider.labels: Invalid value",
		},
		"LabelValueTooLong": {
			reason:  "A label value of 64 characters should be refused.",
			fields:  map[string]any{"spec.initProvider.labels": map[string]any{"team": strings.Repeat("a", 64)}},
			wantErr: "spec.initProvider.labels[team]: Too long",
		},
		"TooManyLabels": {
			reason:  "32 labels should be refused: the provider adds its ownership marker to at most 31.",
			fields:  map[string]any{"spec.initProvider.labels": labels(32)},
			wantErr: "spec.initProvider.labels: Too many",
		},
		"DescriptionControlCharacter": {
			reason:  "A description with a control character should be refused.",
			fields:  map[string]any{"spec.initProvider.description": "bell\a"},
			wantErr: "spec.initProvider.description: Invalid value",
		},
		"DescriptionTooLong": {
			reason:  "A description of 257 characters should be refused.",
			fields:  map[string]any{"spec.initProvider.description": strings.Repeat("d", 257)},
			wantErr: "spec.initProvider.description: Too long",
		},
		"WrongType": {
			reason:  "A size that is not a string should be refused.",
			fields:  map[string]any{"spec.initProvider.size": 3},
			wantErr: "cannot convert v1alpha1 to v1beta1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for scope, k := range map[string]spokeHub{"Namespaced": kinds["NamespacedWidget"], "Cluster": kinds["ClusterWidget"]} {
				in := k.spoke()
				in.SetName("w")
				in.SetAnnotations(annotation(t, tc.fields))
				hub := k.hub()
				err := in.ConvertTo(hub)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("%s\n%s ConvertTo(): want no error, got: %v", tc.reason, scope, err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("%s\n%s ConvertTo(): want an error with %q, got: %v", tc.reason, scope, tc.wantErr, err)
				case err == nil && len(hub.GetAnnotations()) != 0:
					t.Errorf("%s\n%s ConvertTo(): the v1beta1 object should carry no annotation, got %v", tc.reason, scope, hub.GetAnnotations())
				}
			}
		})
	}
}

// FuzzFieldConversionsAnnotation writes any annotation value on a v1beta1
// Widget and on a v1alpha1 Widget. A conversion to v1alpha1 must never fail
// on it; a conversion to v1beta1 may refuse it, and when it does not, what
// it stored must be what v1beta1's schema accepts, with no annotation left.
func FuzzFieldConversionsAnnotation(f *testing.F) {
	for _, seed := range []string{
		"", "{", "null", "[]", `{"spec.initProvider.size":"huge"}`, `{"spec.initProvider.size":1}`,
		`{"spec.initProvider.labels":{"widgetco.io/owner":"x"}}`, `{"spec.initProvider.labels":"x"}`,
		`{"spec.initProvider.description":"a\u0007"}`, `{"spec.initProvider[0]":"x"}`, `{"metadata.name":"x"}`,
		`{"spec.initProvider.size":"small","spec.initProvider.labels":{"a":"b"},"spec.initProvider.description":"d"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, a string) {
		hub := &namespacedv1beta1.Widget{
			ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "team-a", Annotations: map[string]string{conversion.AnnotationKey: a}},
			Spec:       namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}},
		}
		spoke := &namespacedv1alpha1.Widget{}
		if err := spoke.ConvertFrom(hub); err != nil {
			t.Fatalf("ConvertFrom() with annotation %q: %v", a, err)
		}
		if len(spoke.GetAnnotations()) != 0 {
			t.Fatalf("ConvertFrom() with annotation %q: the v1alpha1 object should have no annotation, got %v", a, spoke.GetAnnotations())
		}

		in := &clusterv1alpha1.Widget{
			ObjectMeta: metav1.ObjectMeta{Name: "w", Annotations: map[string]string{conversion.AnnotationKey: a}},
			Spec:       clusterv1alpha1.WidgetSpec{ForProvider: commonv1alpha1.WidgetParameters{Size: ptr.To("small")}},
		}
		out := &clusterv1beta1.Widget{}
		if err := in.ConvertTo(out); err != nil {
			return
		}
		if len(out.GetAnnotations()) != 0 {
			t.Fatalf("ConvertTo() with annotation %q: the v1beta1 object should have no annotation, got %v", a, out.GetAnnotations())
		}
		p := out.Spec.InitProvider
		if s := ptr.Deref(p.Size, "small"); s != "small" && s != "medium" && s != "large" {
			t.Fatalf("ConvertTo() with annotation %q stored size %q", a, s)
		}
		if len(p.Labels) > 31 {
			t.Fatalf("ConvertTo() with annotation %q stored %d labels", a, len(p.Labels))
		}
		for k, v := range p.Labels {
			if k == "" || len(k) > 63 || strings.HasPrefix(k, "widgetco.io/") || strings.ToLower(k) != k || utf8.RuneCountInString(v) > 63 {
				t.Fatalf("ConvertTo() with annotation %q stored label %q=%q", a, k, v)
			}
		}
		if d := ptr.Deref(p.Description, ""); utf8.RuneCountInString(d) > 256 || strings.ContainsFunc(d, func(r rune) bool { return r < ' ' && r != '\t' && r != '\n' }) {
			t.Fatalf("ConvertTo() with annotation %q stored description %q", a, d)
		}
	})
}
