//go:build linux

package e2e_test

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestV1alpha1Objects writes a Widget and a WidgetKey in v1alpha1, the
// version before v1beta1, as a user or a Composition written for it does:
// kube-apiserver converts them through the provider's conversion webhook,
// which Crossplane wired from the package's CRDs. They go Ready, read back in
// v1alpha1 as they were written and in v1beta1 with the region and the key's
// description in spec.initProvider, and the widget and key in the Widget API
// have the region and description asked for.
func TestV1alpha1Objects(t *testing.T) {
	s := newScenario(t, true)
	w := &namespacedv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "alpha"},
		Spec: namespacedv1alpha1.WidgetSpec{
			ManagedResourceSpec: defaultMRSpec(""),
			ForProvider: commonv1alpha1.WidgetParameters{
				Size: ptr.To(widgetapi.SizeSmall), Region: ptr.To("eu-west-1"),
				Labels: map[string]string{labelScenario: s.ns},
			},
		},
	}
	k := &namespacedv1alpha1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "alpha-ci"},
		Spec: namespacedv1alpha1.WidgetKeySpec{
			ManagedResourceSpec: defaultMRSpec("alpha-ci"),
			ForProvider: namespacedv1alpha1.WidgetKeyParameters{
				WidgetNameRef:       &xpv2.NamespacedReference{Name: w.Name},
				WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("written as v1alpha1")},
			},
		},
	}
	s.create(w, k)
	s.eventually("v1alpha1 Widget and WidgetKey Ready", func() error {
		if err := s.ready(w); err != nil {
			return err
		}
		return s.ready(k)
	})
	if ptr.Deref(w.Spec.ForProvider.Region, "") != "eu-west-1" || ptr.Deref(k.Spec.ForProvider.Description, "") != "written as v1alpha1" {
		t.Errorf("read as v1alpha1: region %v, key description %v; want them as written", w.Spec.ForProvider.Region, k.Spec.ForProvider.Description)
	}

	bw := &namespacedv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: w.Name}}
	bk := &namespacedv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: k.Name}}
	if err := s.get(bw); err != nil {
		t.Fatal(err)
	}
	if err := s.get(bk); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(bw.Spec.InitProvider.Region, "") != "eu-west-1" || ptr.Deref(bk.Spec.InitProvider.Description, "") != "written as v1alpha1" {
		t.Errorf("read as v1beta1: initProvider.region %v, key initProvider.description %v; want eu-west-1 and %q", bw.Spec.InitProvider.Region, bk.Spec.InitProvider.Description, "written as v1alpha1")
	}

	aw, err := s.apiWidget(externalName(bw))
	if err != nil {
		t.Fatal(err)
	}
	if aw.Region != "eu-west-1" {
		t.Errorf("widget %s is in %q, want eu-west-1 (the v1alpha1 spec's region)", aw.Name, aw.Region)
	}
	key, err := suite.api.GetKey(s.ctx, aw.Name, externalName(bk))
	if err != nil {
		t.Fatal(err)
	}
	if key.Description != "written as v1alpha1" {
		t.Errorf("key %s has description %q, want %q", key.Name, key.Description, "written as v1alpha1")
	}
}
