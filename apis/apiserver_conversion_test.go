package apis_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// fieldConversions is the annotation in which a v1alpha1 object keeps the
// v1beta1 fields v1alpha1 has no field for (upjet's).
const fieldConversions = "internal.upjet.crossplane.io/field-conversions"

// The spec fields the CRDs default, as every object below reads them back.
var (
	nsDefaults = xpv2.ManagedResourceSpec{
		ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"},
		ManagementPolicies:      xpv2.ManagementPolicies{xpv2.ManagementActionAll},
	}
	clDefaults = xpv2.ClusterManagedResourceSpec{
		ProviderConfigReference: &xpv2.Reference{Name: "default"},
		ManagementPolicies:      xpv2.ManagementPolicies{xpv2.ManagementActionAll},
		DeletionPolicy:          xpv2.DeletionDelete,
	}
)

// readOptions compare an object read from the API server with the one a
// test wants: only its name, namespace, annotations, spec and status count.
var readOptions = cmp.Options{
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "Generation", "CreationTimestamp", "ManagedFields"),
	cmpopts.IgnoreTypes(metav1.TypeMeta{}),
	cmpopts.EquateEmpty(),
}

// testConversion writes Widgets and WidgetKeys in one version and reads them
// in the other, through the API server and its conversion webhook.
func testConversion(t *testing.T, c client.Client) {
	t.Run("Reads", func(t *testing.T) { testConvertedReads(t, c) })
	t.Run("V1beta1FieldsSurviveV1alpha1Update", func(t *testing.T) { testV1alpha1Update(t, c) })
	t.Run("V1alpha1WidgetWithoutSize", func(t *testing.T) { testV1alpha1WithoutSize(t, c) })
}

func testConvertedReads(t *testing.T, c client.Client) {
	om := func(name, ns string, a map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: a}
	}
	cases := map[string]struct {
		reason string
		create client.Object
		// want is the created object as read in each version.
		want []client.Object
	}{
		"NamespacedWidgetFromV1alpha1": {
			reason: "A v1alpha1 Widget's forProvider.region should read as v1beta1's initProvider.region, and read back unchanged in v1alpha1.",
			create: &namespacedv1alpha1.Widget{ObjectMeta: om("conv-alpha", testNamespace, nil), Spec: namespacedv1alpha1.WidgetSpec{
				ForProvider: commonv1alpha1.WidgetParameters{Size: ptr.To("small"), Region: ptr.To("eu-west-1"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
			}},
			want: []client.Object{
				&namespacedv1beta1.Widget{ObjectMeta: om("conv-alpha", testNamespace, nil), Spec: namespacedv1beta1.WidgetSpec{
					ManagedResourceSpec: nsDefaults,
					ForProvider:         commonv1beta1.WidgetParameters{Size: ptr.To("small"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
					InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")},
				}},
				&namespacedv1alpha1.Widget{ObjectMeta: om("conv-alpha", testNamespace, nil), Spec: namespacedv1alpha1.WidgetSpec{
					ManagedResourceSpec: nsDefaults,
					ForProvider:         commonv1alpha1.WidgetParameters{Size: ptr.To("small"), Region: ptr.To("eu-west-1"), Labels: map[string]string{"team": "a"}, Description: ptr.To("d")},
				}},
			},
		},
		"NamespacedWidgetFromV1beta1": {
			reason: "A v1beta1 Widget's initProvider.region should read as v1alpha1's forProvider.region, and its initProvider size, labels and description as upjet's annotation.",
			create: &namespacedv1beta1.Widget{ObjectMeta: om("conv-beta", testNamespace, nil), Spec: namespacedv1beta1.WidgetSpec{
				ForProvider:  commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}},
				InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1"), Size: ptr.To("large"), Labels: map[string]string{"cost-centre": "42"}, Description: ptr.To("first")},
			}},
			want: []client.Object{
				&namespacedv1alpha1.Widget{
					ObjectMeta: om("conv-beta", testNamespace, map[string]string{
						fieldConversions: `{"spec.initProvider.description":"first","spec.initProvider.labels":{"cost-centre":"42"},"spec.initProvider.size":"large"}`,
					}),
					Spec: namespacedv1alpha1.WidgetSpec{
						ManagedResourceSpec: nsDefaults,
						ForProvider:         commonv1alpha1.WidgetParameters{Region: ptr.To("us-east-1"), Labels: map[string]string{"team": "a"}},
					},
				},
			},
		},
		"ClusterWidgetFromV1alpha1": {
			reason: "A cluster-scoped v1alpha1 Widget's forProvider.region should read as v1beta1's initProvider.region.",
			create: &clusterv1alpha1.Widget{ObjectMeta: om("conv-alpha", "", nil), Spec: clusterv1alpha1.WidgetSpec{
				ForProvider: commonv1alpha1.WidgetParameters{Size: ptr.To("medium"), Region: ptr.To("eu-west-1")},
			}},
			want: []client.Object{
				&clusterv1beta1.Widget{ObjectMeta: om("conv-alpha", "", nil), Spec: clusterv1beta1.WidgetSpec{
					ClusterManagedResourceSpec: clDefaults,
					ForProvider:                commonv1beta1.WidgetParameters{Size: ptr.To("medium")},
					InitProvider:               commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")},
				}},
			},
		},
		"NamespacedWidgetKeyFromV1beta1": {
			reason: "A v1beta1 WidgetKey's initProvider.description should read as v1alpha1's forProvider.description.",
			create: &namespacedv1beta1.WidgetKey{ObjectMeta: om("conv-beta", testNamespace, nil), Spec: namespacedv1beta1.WidgetKeySpec{
				ForProvider:  namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")},
				InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("ci key")},
			}},
			want: []client.Object{
				&namespacedv1alpha1.WidgetKey{ObjectMeta: om("conv-beta", testNamespace, nil), Spec: namespacedv1alpha1.WidgetKeySpec{
					ManagedResourceSpec: nsDefaults,
					ForProvider:         namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1"), WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("ci key")}},
				}},
			},
		},
		"ClusterWidgetKeyFromV1alpha1": {
			reason: "A cluster-scoped v1alpha1 WidgetKey's forProvider.description should read as v1beta1's initProvider.description.",
			create: &clusterv1alpha1.WidgetKey{ObjectMeta: om("conv-alpha", "", nil), Spec: clusterv1alpha1.WidgetKeySpec{
				ForProvider: clusterv1alpha1.WidgetKeyParameters{WidgetNameRef: &xpv2.Reference{Name: "w1"}, WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("ci key")}},
			}},
			want: []client.Object{
				&clusterv1beta1.WidgetKey{ObjectMeta: om("conv-alpha", "", nil), Spec: clusterv1beta1.WidgetKeySpec{
					ClusterManagedResourceSpec: clDefaults,
					ForProvider:                clusterv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.Reference{Name: "w1"}},
					InitProvider:               commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("ci key")},
				}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := c.Create(ctx, tc.create); err != nil {
				t.Fatalf("%s\nCreate(): %v", tc.reason, err)
			}
			for _, want := range tc.want {
				got := reflect.New(reflect.TypeOf(want).Elem()).Interface().(client.Object) //nolint:forcetypeassert // want is a client.Object.
				if err := c.Get(ctx, client.ObjectKeyFromObject(tc.create), got); err != nil {
					t.Fatalf("%s\nGet() as %T: %v", tc.reason, got, err)
				}
				if diff := cmp.Diff(want, got, readOptions); diff != "" {
					t.Errorf("%s\nread as %T: -want, +got:\n%s", tc.reason, got, diff)
				}
			}
		})
	}
}

// testV1alpha1Update updates, in v1alpha1, a Widget created in v1beta1: the
// initProvider fields that v1alpha1 lacks survive in upjet's annotation.
func testV1alpha1Update(t *testing.T, c client.Client) {
	ctx := context.Background()
	reason := "A v1alpha1 client that updates a v1beta1 Widget, sending back the annotation it read, should keep the Widget's initProvider."
	created := nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{
		InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1"), Size: ptr.To("large"), Labels: map[string]string{"cost-centre": "42"}, Description: ptr.To("first")},
	})
	created.SetName("conv-update")
	if err := c.Create(ctx, created); err != nil {
		t.Fatalf("%s\nCreate(): %v", reason, err)
	}

	alpha := &namespacedv1alpha1.Widget{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(created), alpha); err != nil {
		t.Fatalf("%s\nGet() as v1alpha1: %v", reason, err)
	}
	wantAnnotations := map[string]string{
		fieldConversions: `{"spec.initProvider.description":"first","spec.initProvider.labels":{"cost-centre":"42"},"spec.initProvider.size":"large"}`,
	}
	if diff := cmp.Diff(wantAnnotations, alpha.GetAnnotations()); diff != "" {
		t.Fatalf("%s\nannotations read as v1alpha1: -want, +got:\n%s", reason, diff)
	}
	alpha.Spec.ForProvider.Labels = map[string]string{"team": "a"}
	alpha.Spec.ForProvider.Description = ptr.To("second")
	if err := c.Update(ctx, alpha); err != nil {
		t.Fatalf("%s\nUpdate() as v1alpha1: %v", reason, err)
	}

	want := &namespacedv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "conv-update", Namespace: testNamespace}, Spec: namespacedv1beta1.WidgetSpec{
		ManagedResourceSpec: nsDefaults,
		ForProvider:         commonv1beta1.WidgetParameters{Labels: map[string]string{"team": "a"}, Description: ptr.To("second")},
		InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1"), Size: ptr.To("large"), Labels: map[string]string{"cost-centre": "42"}, Description: ptr.To("first")},
	}}
	got := &namespacedv1beta1.Widget{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(created), got); err != nil {
		t.Fatalf("%s\nGet() as v1beta1: %v", reason, err)
	}
	if diff := cmp.Diff(want, got, readOptions); diff != "" {
		t.Errorf("%s\nread as v1beta1 after the v1alpha1 update: -want, +got:\n%s", reason, diff)
	}
}

// testV1alpha1WithoutSize documents what the API server does with a Widget
// written in v1alpha1 without a size. The API server validates a write
// against the schema of the version it is made in, and stores the converted
// object without validating it against the storage version's schema: v1beta1
// requires a size, v1alpha1 does not.
func testV1alpha1WithoutSize(t *testing.T, c client.Client) {
	ctx := context.Background()
	alpha := nsWidget(commonv1alpha1.WidgetParameters{Region: ptr.To("eu-west-1")})
	alpha.SetName("conv-no-size")
	if err := c.Create(ctx, alpha); err != nil {
		t.Fatalf("A fully managed v1alpha1 Widget without a size is valid in v1alpha1 and should be accepted: %v", err)
	}

	beta := &namespacedv1beta1.Widget{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(alpha), beta); err != nil {
		t.Fatalf("Get() as v1beta1: %v", err)
	}
	want := namespacedv1beta1.WidgetSpec{ManagedResourceSpec: nsDefaults, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}
	if diff := cmp.Diff(want, beta.Spec, readOptions); diff != "" {
		t.Errorf("The Widget should be stored, and read in v1beta1, without a size: -want, +got:\n%s", diff)
	}

	// The provider writes v1beta1. Writes that leave spec as it is are
	// accepted: the API server ratchets the size rule on an unchanged spec.
	beta.SetFinalizers([]string{"finalizer.managedresource.crossplane.io"})
	meta.SetExternalName(beta, "team-a-no-size")
	if err := c.Update(ctx, beta); err != nil {
		t.Errorf("A v1beta1 update that leaves the spec without a size as it is should be accepted: %v", err)
	}
	// A v1beta1 write that changes spec must add the size.
	beta.Spec.ForProvider.Description = ptr.To("d")
	if err := c.Update(ctx, beta); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), ruleSizeRequired.Message) {
		t.Errorf("A v1beta1 update that changes the spec of a Widget without a size should be rejected with %q, got: %v", ruleSizeRequired.Message, err)
	}
	// A v1alpha1 write that changes spec is validated in v1alpha1.
	if err := c.Get(ctx, client.ObjectKeyFromObject(alpha), alpha); err != nil {
		t.Fatalf("Get() as v1alpha1: %v", err)
	}
	alpha.Spec.ForProvider.Description = ptr.To("d")
	if err := c.Update(ctx, alpha); err != nil {
		t.Errorf("A v1alpha1 update that changes the spec of a Widget without a size is valid in v1alpha1 and should be accepted: %v", err)
	}
}
