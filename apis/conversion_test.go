package apis_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/upjet/v2/pkg/config/conversion"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// fuzzIterations is how many fuzzed objects each round trip checks per kind.
const fuzzIterations = 300

// spokeHub is one kind's v1alpha1 (spoke) and v1beta1 (hub) types.
type spokeHub struct {
	spoke func() spoke
	hub   func() hub
}

type spoke interface {
	client.Object
	ctrlconversion.Convertible
}

type hub interface {
	client.Object
	ctrlconversion.Hub
}

var kinds = map[string]spokeHub{
	"NamespacedWidget":    {func() spoke { return &namespacedv1alpha1.Widget{} }, func() hub { return &namespacedv1beta1.Widget{} }},
	"NamespacedWidgetKey": {func() spoke { return &namespacedv1alpha1.WidgetKey{} }, func() hub { return &namespacedv1beta1.WidgetKey{} }},
	"ClusterWidget":       {func() spoke { return &clusterv1alpha1.Widget{} }, func() hub { return &clusterv1beta1.Widget{} }},
	"ClusterWidgetKey":    {func() spoke { return &clusterv1alpha1.WidgetKey{} }, func() hub { return &clusterv1beta1.WidgetKey{} }},
}

// roundTripOptions compare objects after a round trip: absent and empty
// collections are the same on the wire.
var roundTripOptions = cmp.Options{cmpopts.EquateEmpty()}

// filler fills objects with random values that survive the JSON form an API
// server stores: times with second precision, managed fields as JSON.
func filler(t *testing.T, seed int64) *randfill.Filler {
	t.Helper()
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	extra := func(serializer.CodecFactory) []any {
		return []any{
			func(tm *metav1.Time, c randfill.Continue) {
				*tm = metav1.Unix(int64(c.Uint32()), 0)
			},
			func(f *metav1.FieldsV1, c randfill.Continue) {
				f.Raw = []byte(`{"f:spec":{}}`)
			},
			func(c *xpv2.Condition, r randfill.Continue) {
				r.FillNoCustom(c)
				c.LastTransitionTime = metav1.Unix(int64(r.Uint32()), 0)
			},
			// A v1beta1 Widget's initProvider size, labels and description
			// travel in a v1alpha1 object's annotation, whose conversion
			// back refuses what v1beta1's schema refuses: fill them with
			// values the API server would store.
			func(p *commonv1beta1.WidgetInitParameters, r randfill.Continue) {
				r.FillNoCustom(p)
				if p.Size != nil {
					p.Size = ptr.To([]string{"small", "medium", "large"}[r.Intn(3)])
				}
				if p.Labels != nil {
					p.Labels = map[string]string{}
					for i := range r.Intn(4) {
						p.Labels[fmt.Sprintf("k%d.example.com/l-%d", i, r.Intn(100))] = fmt.Sprintf("v %d", r.Uint32())
					}
				}
				if p.Description != nil {
					p.Description = ptr.To(fmt.Sprintf("description\t%d\n", r.Uint32()))
				}
			},
			// A v1beta1 WidgetKey's rotation travels in the annotation
			// too, and is checked the same way.
			func(p *commonv1beta1.KeyRotation, r randfill.Continue) {
				r.FillNoCustom(p)
				p.Overlap = metav1.Duration{Duration: time.Duration(5+r.Intn(55)) * time.Minute}
				if p.Period != nil {
					p.Period = &metav1.Duration{Duration: time.Duration(1+r.Intn(1000)) * time.Hour}
				}
				if p.RequestedAt != nil {
					p.RequestedAt = ptr.To(metav1.Unix(int64(r.Uint32()), 0))
				}
			},
		}
	}
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, extra), rand.NewSource(seed), serializer.NewCodecFactory(s)).NilChance(0.3).NumElements(0, 3)
}

// TestConversionRoundTrip converts fuzzed objects hub -> spoke -> hub and
// spoke -> hub -> spoke and requires them unchanged: no field of either
// version is lost.
func TestConversionRoundTrip(t *testing.T) {
	for name, k := range kinds {
		t.Run(name+"/HubSpokeHub", func(t *testing.T) {
			f := filler(t, 1)
			for i := range fuzzIterations {
				in := k.hub()
				f.Fill(in)
				sp := k.spoke()
				if err := sp.ConvertFrom(in.DeepCopyObject().(hub)); err != nil { //nolint:forcetypeassert // Same type.
					t.Fatalf("iteration %d: ConvertFrom(): %v", i, err)
				}
				out := k.hub()
				if err := sp.ConvertTo(out); err != nil {
					t.Fatalf("iteration %d: ConvertTo(): %v", i, err)
				}
				clearTypeMeta(in, out)
				if diff := cmp.Diff(in, out, roundTripOptions); diff != "" {
					t.Fatalf("iteration %d: hub -> spoke -> hub changed the object: -want, +got:\n%s", i, diff)
				}
			}
		})
		t.Run(name+"/SpokeHubSpoke", func(t *testing.T) {
			f := filler(t, 2)
			for i := range fuzzIterations {
				in := k.spoke()
				f.Fill(in)
				h := k.hub()
				if err := in.DeepCopyObject().(spoke).ConvertTo(h); err != nil { //nolint:forcetypeassert // Same type.
					t.Fatalf("iteration %d: ConvertTo(): %v", i, err)
				}
				out := k.spoke()
				if err := out.ConvertFrom(h); err != nil {
					t.Fatalf("iteration %d: ConvertFrom(): %v", i, err)
				}
				clearTypeMeta(in, out)
				if diff := cmp.Diff(in, out, roundTripOptions); diff != "" {
					t.Fatalf("iteration %d: spoke -> hub -> spoke changed the object: -want, +got:\n%s", i, diff)
				}
			}
		})
	}
}

func clearTypeMeta(objs ...runtime.Object) {
	for _, o := range objs {
		o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
}

// annotation is upjet's field-conversions annotation holding the v1beta1
// fields a v1alpha1 object lacks.
func annotation(t *testing.T, fields map[string]any) map[string]string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{conversion.AnnotationKey: string(b)}
}

func TestWidgetConversion(t *testing.T) {
	meta := func(a map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "w", Namespace: "team-a", Annotations: a}
	}
	withOther := func(a map[string]string) map[string]string {
		a["crossplane.io/external-name"] = "team-a-w"
		return a
	}
	cases := map[string]struct {
		reason string
		alpha  *namespacedv1alpha1.Widget
		beta   *namespacedv1beta1.Widget
	}{
		"RegionIsInitProvider": {
			reason: "v1alpha1's forProvider.region should be v1beta1's initProvider.region, the other fields unchanged.",
			alpha: &namespacedv1alpha1.Widget{ObjectMeta: meta(nil), Spec: namespacedv1alpha1.WidgetSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: xpv2.ManagementPolicies{xpv2.ManagementActionAll}},
				ForProvider:         commonv1alpha1.WidgetParameters{Size: ptr.To("medium"), Region: ptr.To("eu-west-1"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			}},
			beta: &namespacedv1beta1.Widget{ObjectMeta: meta(nil), Spec: namespacedv1beta1.WidgetSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ManagementPolicies: xpv2.ManagementPolicies{xpv2.ManagementActionAll}},
				ForProvider:         commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
				InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")},
			}},
		},
		"InitOnlyFieldsInAnnotation": {
			reason: "v1beta1's initProvider size, labels and description, which v1alpha1 lacks, should be kept in upjet's annotation on the v1alpha1 object (next to the object's other annotations) and restored from it.",
			alpha: &namespacedv1alpha1.Widget{
				ObjectMeta: meta(withOther(annotation(t, map[string]any{
					"spec.initProvider.size":        "large",
					"spec.initProvider.labels":      map[string]any{"cost-centre": "42"},
					"spec.initProvider.description": "first",
				}))),
				Spec: namespacedv1alpha1.WidgetSpec{ForProvider: commonv1alpha1.WidgetParameters{Region: ptr.To("us-east-1")}},
			},
			beta: &namespacedv1beta1.Widget{
				ObjectMeta: meta(withOther(map[string]string{})),
				Spec: namespacedv1beta1.WidgetSpec{InitProvider: commonv1beta1.WidgetInitParameters{
					Region: ptr.To("us-east-1"), Size: ptr.To("large"), Labels: map[string]string{"cost-centre": "42"}, Description: ptr.To("first"),
				}},
			},
		},
		"StatusUnchanged": {
			reason: "status should be copied as it is.",
			alpha: &namespacedv1alpha1.Widget{ObjectMeta: meta(nil), Status: namespacedv1alpha1.WidgetStatus{
				ManagedResourceStatus: xpv2.ManagedResourceStatus{ConditionedStatus: xpv2.ConditionedStatus{Conditions: []xpv2.Condition{xpv2.Available().WithObservedGeneration(3)}}},
				AtProvider:            commonv1alpha1.WidgetObservation{ID: "w-1", State: commonv1alpha1.WidgetStateReady, Region: "eu-west-1", Size: "small", Generation: 2},
			}},
			beta: &namespacedv1beta1.Widget{ObjectMeta: meta(nil), Status: namespacedv1beta1.WidgetStatus{
				ManagedResourceStatus: xpv2.ManagedResourceStatus{ConditionedStatus: xpv2.ConditionedStatus{Conditions: []xpv2.Condition{xpv2.Available().WithObservedGeneration(3)}}},
				AtProvider:            commonv1beta1.WidgetObservation{ID: "w-1", State: commonv1beta1.WidgetStateReady, Region: "eu-west-1", Size: "small", Generation: 2},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gotBeta := &namespacedv1beta1.Widget{}
			if err := tc.alpha.DeepCopy().ConvertTo(gotBeta); err != nil {
				t.Fatalf("%s\nConvertTo(): %v", tc.reason, err)
			}
			clearTypeMeta(gotBeta)
			if diff := cmp.Diff(tc.beta, gotBeta, roundTripOptions); diff != "" {
				t.Errorf("%s\nv1alpha1 -> v1beta1: -want, +got:\n%s", tc.reason, diff)
			}
			gotAlpha := &namespacedv1alpha1.Widget{}
			if err := gotAlpha.ConvertFrom(tc.beta.DeepCopy()); err != nil {
				t.Fatalf("%s\nConvertFrom(): %v", tc.reason, err)
			}
			clearTypeMeta(gotAlpha)
			if diff := cmp.Diff(tc.alpha, gotAlpha, roundTripOptions); diff != "" {
				t.Errorf("%s\nv1beta1 -> v1alpha1: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWidgetKeyConversion(t *testing.T) {
	alpha := &clusterv1alpha1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Name: "k", Annotations: map[string]string{"crossplane.io/external-name": "ci"}},
		Spec: clusterv1alpha1.WidgetKeySpec{ForProvider: clusterv1alpha1.WidgetKeyParameters{
			WidgetNameRef:       &xpv2.Reference{Name: "w"},
			WidgetName:          ptr.To("team-a-w"),
			WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("ci key")},
		}},
		Status: clusterv1alpha1.WidgetKeyStatus{AtProvider: commonv1alpha1.WidgetKeyObservation{ID: "k-1", WidgetName: "team-a-w", Description: "ci key"}},
	}
	beta := &clusterv1beta1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Name: "k", Annotations: map[string]string{"crossplane.io/external-name": "ci"}},
		Spec: clusterv1beta1.WidgetKeySpec{
			ForProvider:  clusterv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.Reference{Name: "w"}, WidgetName: ptr.To("team-a-w")},
			InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("ci key")},
		},
		Status: clusterv1beta1.WidgetKeyStatus{AtProvider: commonv1beta1.WidgetKeyObservation{ID: "k-1", WidgetName: "team-a-w", Description: "ci key"}},
	}
	reason := "v1alpha1's forProvider.description should be v1beta1's initProvider.description, the widget reference and status unchanged."
	gotBeta := &clusterv1beta1.WidgetKey{}
	if err := alpha.DeepCopy().ConvertTo(gotBeta); err != nil {
		t.Fatalf("%s\nConvertTo(): %v", reason, err)
	}
	clearTypeMeta(gotBeta)
	if diff := cmp.Diff(beta, gotBeta, roundTripOptions); diff != "" {
		t.Errorf("%s\nv1alpha1 -> v1beta1: -want, +got:\n%s", reason, diff)
	}
	gotAlpha := &clusterv1alpha1.WidgetKey{}
	if err := gotAlpha.ConvertFrom(beta.DeepCopy()); err != nil {
		t.Fatalf("%s\nConvertFrom(): %v", reason, err)
	}
	clearTypeMeta(gotAlpha)
	if diff := cmp.Diff(alpha, gotAlpha, roundTripOptions); diff != "" {
		t.Errorf("%s\nv1beta1 -> v1alpha1: -want, +got:\n%s", reason, diff)
	}
}

func TestConversionErrors(t *testing.T) {
	// A v1alpha1 object whose field-conversions annotation is not JSON (a
	// user edited it) cannot be converted; the error says so instead of
	// dropping the fields.
	in := &namespacedv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Annotations: map[string]string{conversion.AnnotationKey: "{not json"}}}
	if err := in.ConvertTo(&namespacedv1beta1.Widget{}); err == nil {
		t.Errorf("ConvertTo() with a malformed %s annotation: want an error, got none", conversion.AnnotationKey)
	}
	if err := in.ConvertTo(&namespacedv1beta1.WidgetKey{}); err == nil {
		t.Errorf("ConvertTo() to another kind's hub: want an error, got none")
	}
}
