package apis_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// readExample returns the objects of a YAML file under examples/.
func readExample(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "examples", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("cannot decode %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// testExamples applies examples/runtime/networkpolicy.yaml, which the API
// server can only check for validity (envtest enforces no network policy),
// and examples/admission/tenant-inputs.yaml, whose ValidatingAdmissionPolicy
// it enforces: the writes it exists to refuse must be refused, the ones
// Crossplane and the conversion make must not. It runs last: the policy
// refuses writes other tests make on purpose.
func testExamples(t *testing.T, c client.Client) {
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Stored before the policy: it may still be updated, as long as the
	// annotation stays as it is.
	legacy := nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}})
	legacy.SetName("policy-legacy")
	legacy.SetAnnotations(map[string]string{fieldConversions: "{"})
	if err := c.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"runtime/networkpolicy.yaml", "admission/tenant-inputs.yaml"} {
		for _, o := range readExample(t, path) {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("Create() %s %s from examples/%s: %v", o.GetKind(), o.GetName(), path, err)
			}
			t.Cleanup(func() { _ = c.Delete(ctx, o) })
		}
	}

	annotated := func(name string) *namespacedv1beta1.Widget {
		w := nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}})
		w.SetName(name)
		w.SetAnnotations(map[string]string{fieldConversions: `{"spec.initProvider.size":"large"}`})
		return w
	}
	// The API server takes a moment to load a new policy.
	probe := 0
	wait.For(t, 30*time.Second, "the ValidatingAdmissionPolicy to refuse the annotation through v1beta1", func() error {
		probe++
		w := annotated("policy-probe-" + strings.Repeat("x", probe))
		if err := c.Create(ctx, w); err != nil {
			return nil //nolint:nilerr // Refused: the policy is active.
		}
		return errors.New("accepted")
	})

	selected := func(name, ns string) *namespacedv1beta1.WidgetKey {
		k := nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{
			WidgetName:         ptr.To("w1"),
			WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}},
			WidgetNameRef:      &xpv2.NamespacedReference{Name: "w1", Namespace: ns},
		}})
		k.SetName(name)
		return k
	}
	alpha := nsWidget(commonv1alpha1.WidgetParameters{Size: ptr.To("small")})
	alpha.SetName("policy-alpha")
	alpha.SetAnnotations(map[string]string{fieldConversions: `{"spec.initProvider.size":"large"}`})

	cases := map[string]struct {
		reason  string
		create  client.Object
		wantErr string
	}{
		"AnnotationThroughV1beta1": {
			reason:  "A v1beta1 write that adds the field-conversions annotation should be refused.",
			create:  annotated("policy-annotated"),
			wantErr: "internal.upjet.crossplane.io/field-conversions is written by the API's conversion from v1alpha1 only",
		},
		"AnnotationThroughV1alpha1": {
			reason: "A v1alpha1 write carrying the annotation should be accepted: the conversion to v1beta1 removes it before the policy sees it.",
			create: alpha,
		},
		"ReferenceIntoAnotherNamespace": {
			reason:  "A resolved-looking WidgetKey whose reference names another namespace, which the CRD accepts, should be refused.",
			create:  selected("policy-other-namespace", "team-b"),
			wantErr: "widgetNameRef.namespace must be empty or the WidgetKey's own namespace",
		},
		"ReferenceIntoOwnNamespace": {
			reason: "The WidgetKey as Crossplane writes it when it resolves a selector should be accepted.",
			create: selected("policy-own-namespace", testNamespace),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkWrite(t, tc.reason, "with the policy", c.Create(ctx, tc.create), tc.wantErr)
		})
	}

	t.Run("StoredAnnotation", func(t *testing.T) {
		legacy.SetLabels(map[string]string{"team": "a"})
		if err := c.Update(ctx, legacy); err != nil {
			t.Errorf("An update of a Widget stored with the annotation, which leaves it as it is, should be accepted: %v", err)
		}
		legacy.SetAnnotations(map[string]string{fieldConversions: `{"spec.initProvider.size":"huge"}`})
		if err := c.Update(ctx, legacy); err == nil || !strings.Contains(err.Error(), "field-conversions is written by the API's conversion") {
			t.Errorf("An update that changes a stored annotation should be refused by the policy, got: %v", err)
		}
	})
}
