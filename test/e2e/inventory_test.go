//go:build linux

package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestBulkAdoption is a team moving onto the platform with widgets it
// already runs (docs/operations.md#adopt-what-a-team-already-runs): a
// WidgetInventory in its namespace lists the project's unowned widgets and
// only counts another namespace's; an AdoptWidgets Operation writes one
// XWidget per unowned widget, each reviewing its widget (one whose size the
// platform's policy does not allow says so instead), and nothing in the
// Widget API changes; a rerun writes nothing more.
func TestBulkAdoption(t *testing.T) {
	s := newScenario(t, true)
	sel := map[string]string{"moving": s.ns}
	created := make([]*widgetapi.Widget, 0, 3)
	for i, size := range []string{widgetapi.SizeSmall, widgetapi.SizeMedium, widgetapi.SizeLarge} {
		w, err := suite.api.CreateWidget(s.ctx, widgetapi.CreateWidgetRequest{Name: fmt.Sprintf("%s-old-%d", s.ns, i), Size: size, Region: "us-east-1",
			Labels: map[string]string{"moving": s.ns, "app": "old", labelScenario: s.ns}})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, w)
	}
	// Another namespace's widget, with the same label: counted, never named.
	foreign := s.ns + "-foreign"
	if _, err := suite.api.CreateWidget(s.ctx, widgetapi.CreateWidgetRequest{Name: foreign, Size: widgetapi.SizeSmall, Region: "us-east-1",
		Labels: map[string]string{"moving": s.ns, labelScenario: s.ns, ownerLabel: "n_elsewhere.api"}}); err != nil {
		t.Fatal(err)
	}

	inv := &nsv1beta1.WidgetInventory{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "moving"},
		Spec: nsv1beta1.WidgetInventorySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
			ForProvider:         nsv1beta1.WidgetInventoryParameters{MatchLabels: sel, Limit: ptr.To(int32(10))},
		},
	}
	s.create(inv)
	s.eventually("the inventory lists the project", func() error {
		if err := suite.kube.Get(s.ctx, client.ObjectKeyFromObject(inv), inv); err != nil {
			return err
		}
		a := inv.Status.AtProvider
		if inv.GetCondition(xpv2.TypeReady).Status != "True" || a.Matched != 4 || a.Unowned != 3 || a.OutOfReach != 1 {
			return errors.Errorf("Ready=%s matched %d unowned %d out of reach %d", inv.GetCondition(xpv2.TypeReady).Status, a.Matched, a.Unowned, a.OutOfReach)
		}
		return nil
	})
	listed := make([]string, 0, len(inv.Status.AtProvider.Widgets))
	for _, w := range inv.Status.AtProvider.Widgets {
		listed = append(listed, w.Name+"="+string(w.Owner))
	}
	if want := []string{created[0].Name + "=Unowned", created[1].Name + "=Unowned", created[2].Name + "=Unowned"}; !slices.Equal(listed, want) {
		t.Errorf("the inventory lists %v, want %v", listed, want)
	}
	if strings.Contains(fmt.Sprint(inv.Status.AtProvider.Widgets), foreign) {
		t.Errorf("the inventory names another namespace's widget %s", foreign)
	}
	t.Logf("Inventory: %d matched, %d unowned listed, %d out of reach counted", inv.Status.AtProvider.Matched, inv.Status.AtProvider.Unowned, inv.Status.AtProvider.OutOfReach)

	run := func(name string) map[string]any {
		return s.operation(name, map[string]any{
			"apiVersion": "fn.widgetco.io/v1beta1",
			"kind":       "AdoptWidgets",
			"inventory":  map[string]any{"namespace": s.ns, "name": inv.Name},
			"composite":  map[string]any{"apiVersion": xwidgetAPIVersion, "kind": "XWidget"},
			// The platform's policy requires a team label, which these
			// widgets lack.
			"labels": map[string]any{"team": "payments"},
		})
	}
	start := time.Now()
	out := run("adopt-" + s.ns)
	if out["written"] != int64(3) {
		t.Errorf("the Operation's output: %v; want 3 written", out)
	}
	for i, w := range created {
		xr := &unstructured.Unstructured{}
		xr.SetAPIVersion(xwidgetAPIVersion)
		xr.SetKind("XWidget")
		xr.SetNamespace(s.ns)
		xr.SetName(w.Name)
		if w.Size == widgetapi.SizeLarge {
			// The e2e platform's policy allows small and medium only.
			c := s.condition(xr, "PolicyCompliant", func(c platform.Condition) bool { return c.Reason == "PolicyViolation" })
			if !strings.Contains(c.Message, `spec.size: Unsupported value: "large"`) {
				t.Errorf("XWidget %s for a large widget: the refusal does not name spec.size: %s", w.Name, c.Message)
			}
			continue
		}
		c := s.condition(xr, "Adopted", func(c platform.Condition) bool { return c.Reason == "WouldChange" || c.Reason == "NoDifference" })
		if mode := nested(xr, "spec", "adopt", "mode"); mode != "Review" || nested(xr, "spec", "size") != w.Size {
			t.Errorf("XWidget %s: adopt mode %q size %q, want Review and the widget's %s", w.Name, mode, nested(xr, "spec", "size"), w.Size)
		}
		if i == 0 {
			t.Logf("Review of %s: Adopted=%s (%s): %s", w.Name, c.Status, c.Reason, c.Message)
		}
	}
	took := time.Since(start)
	for _, w := range created {
		got, err := s.apiWidget(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != w.Generation || got.Labels[ownerLabel] != "" {
			t.Errorf("the reviews changed widget %s: generation %d -> %d, owner %q", w.Name, w.Generation, got.Generation, got.Labels[ownerLabel])
		}
	}
	if again := run("adopt-again-" + s.ns); again["written"] != int64(0) {
		t.Errorf("a rerun wrote %v, want nothing: every widget already has its XWidget", again["written"])
	}
	t.Logf("MEASURED bulk adoption: 3 XWidgets written, 2 reviews done and 1 refused by the policy %s after the Operation was created; 0 widgets changed", took.Round(100*time.Millisecond))
}
