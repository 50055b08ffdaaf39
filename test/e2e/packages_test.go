//go:build linux

package e2e_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestPackagesInstalled checks what Crossplane's package manager made of the
// two packages: both Installed and Healthy, and the provider's managed
// resource kinds served as ManagedResourceDefinitions that the platform's
// activation policy activated (the control plane has no default policy, and
// the provider declares safe-start).
func TestPackagesInstalled(t *testing.T) {
	s := newScenario(t, true)
	c := suite.c.Client()
	prov, fn := &pkgv1.Provider{}, &pkgv1.Function{}
	for name, pkg := range map[string]interface {
		client.Object
		GetCondition(xpv2.ConditionType) xpv2.Condition
	}{platform.ProviderName: prov, platform.FunctionName: fn} {
		if err := c.Get(s.ctx, types.NamespacedName{Name: name}, pkg); err != nil {
			t.Fatalf("cannot get package %s: %v", name, err)
		}
		for _, ct := range []xpv2.ConditionType{pkgv1.TypeInstalled, pkgv1.TypeHealthy} {
			if got := pkg.GetCondition(ct); got.Status != corev1.ConditionTrue {
				t.Errorf("package %s: %s=%s (%s), want True", name, ct, got.Status, got.Message)
			}
		}
	}

	p := &xpextv1alpha1.ManagedResourceActivationPolicy{}
	s.eventually("activation policy reports what it activated", func() error {
		if err := c.Get(s.ctx, types.NamespacedName{Name: platform.ActivationPolicy}, p); err != nil {
			return err
		}
		for _, n := range platform.ManagedCRDs {
			if !slices.Contains(p.Status.Activated, n) {
				return errors.Errorf("ManagedResourceActivationPolicy %s activated %v, want %s among them", p.Name, p.Status.Activated, n)
			}
		}
		return nil
	})
	for _, n := range platform.ManagedCRDs {
		mrd := &xpextv1alpha1.ManagedResourceDefinition{}
		if err := c.Get(s.ctx, types.NamespacedName{Name: n}, mrd); err != nil {
			t.Errorf("cannot get ManagedResourceDefinition %s: %v", n, err)
			continue
		}
		if mrd.Spec.State != xpextv1alpha1.ManagedResourceDefinitionActive {
			t.Errorf("ManagedResourceDefinition %s is %s, want Active", n, mrd.Spec.State)
		}
	}
}
