//go:build linux

package e2e_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// ownerLabel is the label the provider marks the widgets it manages with.
const ownerLabel = commonv1beta1.OwnershipLabelPrefix + "owner"

// driftRounds is how many out-of-band changes TestDriftRepair makes.
const driftRounds = 3

// TestDriftRepair changes a Ready XWidget's widget behind Crossplane's back,
// through the Widget API, and measures how long the provider takes to put
// it back. It runs alone so that the latency it reports is the provider's.
func TestDriftRepair(t *testing.T) {
	s := newScenario(t, false)
	xr := s.xwidget("drift", map[string]any{"size": "small", "keys": int64(0)})
	s.create(xr)
	s.waitReady(xr)
	name := status(xr, "externalName")
	mr := s.composedWidget(xr)

	latencies := make([]time.Duration, 0, driftRounds)
	for i := range driftRounds {
		s.eventually("widget Ready before the change", func() error { return s.widgetState(name, widgetapi.SizeSmall) })
		w, err := s.apiWidget(name)
		if err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for k, v := range w.Labels {
			labels[k] = v
		}
		labels["team"] = "intruders"
		changed := time.Now()
		if _, err := suite.api.PatchWidget(s.ctx, name, widgetapi.PatchWidgetRequest{Size: ptr.To(widgetapi.SizeLarge), Labels: &labels}); err != nil {
			t.Fatalf("cannot change widget %s out of band: %v", name, err)
		}
		// Poll tightly: this is a measurement, not an assertion.
		var repaired time.Duration
		for repaired == 0 {
			w, err := s.apiWidget(name)
			switch {
			case err != nil:
				t.Fatalf("cannot get widget %s: %v", name, err)
			case w.Size == widgetapi.SizeSmall && w.Labels["team"] == "payments":
				repaired = time.Since(changed)
			case time.Since(changed) > waitTimeout:
				t.Fatalf("widget %s not repaired after %s: size %s, labels %v", name, waitTimeout, w.Size, w.Labels)
			default:
				time.Sleep(10 * time.Millisecond)
			}
		}
		latencies = append(latencies, repaired)
		t.Logf("MEASURED drift repair latency, change %d of %d (size and labels changed through the Widget API until both are back): %s", i+1, driftRounds, repaired.Round(time.Millisecond))
	}
	slices.Sort(latencies)
	t.Logf("MEASURED drift repair latency: median %s, min %s, max %s over %d changes (provider with the change feed, default --poll-interval 10m)",
		latencies[len(latencies)/2].Round(time.Millisecond), latencies[0].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), driftRounds)

	s.eventually("DriftRepaired event on the Widget", func() error { return s.event(s.ns, mr.GetName(), "DriftRepaired") })
	s.eventually("widget Ready after the repairs", func() error { return s.widgetState(name, widgetapi.SizeSmall) })
	s.waitReady(xr)

	// The app team's XWidget says how often and what was restored, and a
	// platform team's report finds it (docs/operations.md).
	s.eventually("the repairs on the XWidget's status.drift", func() error {
		if err := suite.kube.Get(s.ctx, client.ObjectKeyFromObject(xr), xr); err != nil {
			return err
		}
		n, _, _ := unstructured.NestedInt64(xr.Object, "status", "drift", "repairs")
		change, _, _ := unstructured.NestedString(xr.Object, "status", "drift", "lastChange")
		if n < driftRounds || !strings.Contains(change, "size") {
			d, _, _ := unstructured.NestedFieldNoCopy(xr.Object, "status", "drift")
			return errors.Errorf("status.drift %v; want at least %d repairs, the last restoring the size", d, driftRounds)
		}
		return nil
	})
	report := s.operation("drift-"+s.ns, map[string]any{
		"apiVersion": "fn.widgetco.io/v1beta1",
		"kind":       "WidgetReport",
		"target":     map[string]any{"apiVersion": xwidgetAPIVersion, "kind": "XWidget", "namespace": s.ns},
	})
	if counts, _ := report["counts"].(map[string]any); counts["Drift/Repaired"] != int64(1) {
		t.Errorf("the report: %v; want one Drift/Repaired finding", report)
	}
}

// TestAdoption creates a widget directly in the Widget API and then a Widget
// managed resource naming it as its external name: the provider adopts it
// (and makes it match the spec) instead of creating a second one.
func TestAdoption(t *testing.T) {
	s := newScenario(t, true)
	name := s.ns + "-existing"
	before, err := suite.api.CreateWidget(s.ctx, widgetapi.CreateWidgetRequest{
		Name: name, Size: widgetapi.SizeSmall, Region: "us-east-1",
		Labels: map[string]string{labelScenario: s.ns},
	})
	if err != nil {
		t.Fatalf("cannot create widget %s in the Widget API: %v", name, err)
	}

	mr := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "adopted", Annotations: map[string]string{"crossplane.io/external-name": name}},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
			ForProvider: commonv1beta1.WidgetParameters{
				Size:   ptr.To(widgetapi.SizeMedium),
				Labels: map[string]string{labelScenario: s.ns, "team": "adopters"},
			},
			InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")},
		},
	}
	s.create(mr)
	s.eventually("adopted widget Ready with the spec's size", func() error {
		if err := s.managedReady(mr); err != nil {
			return err
		}
		return s.widgetState(name, widgetapi.SizeMedium)
	})
	after, err := s.apiWidget(name)
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID {
		t.Errorf("widget %s has ID %s, want %s: it was re-created instead of adopted", name, after.ID, before.ID)
	}
	if after.Labels["team"] != "adopters" || after.Labels[ownerLabel] == "" {
		t.Errorf("adopted widget's labels = %v, want the spec's team=adopters and the provider's %s", after.Labels, ownerLabel)
	}
	if ws, err := s.scenarioWidgets(); err != nil || len(ws) != 1 {
		t.Errorf("Widget API holds %d widgets of the scenario (error %v), want only the adopted one", len(ws), err)
	}
	if _, err := s.apiWidget(s.ns + "-" + mr.Name); !widgetapi.IsNotFound(err) {
		t.Errorf("a widget under the resource's default name %s-%s exists (get: %v), want none", s.ns, mr.Name, err)
	}
	s.eventually("AdoptedWidget event", func() error { return s.event(s.ns, mr.Name, "AdoptedWidget") })
}

// TestObserveOnlyImport imports an existing widget with the example
// import.yaml (managementPolicies: [Observe], through the example namespaced
// ProviderConfig): the provider reports it and fills in the spec without
// touching it. Then, as the example's step 2 says, it takes the widget over.
func TestObserveOnlyImport(t *testing.T) {
	s := newScenario(t, true)
	s.namespacedProviderConfig()
	name := s.ns + "-legacy"
	before, err := suite.api.CreateWidget(s.ctx, widgetapi.CreateWidgetRequest{
		Name: name, Size: widgetapi.SizeLarge, Region: "eu-west-1",
		Labels:      map[string]string{labelScenario: s.ns, "app": "legacy"},
		Description: "made by hand before Crossplane",
	})
	if err != nil {
		t.Fatalf("cannot create widget %s in the Widget API: %v", name, err)
	}
	objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "provider", "import.yaml"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("cannot read examples/provider/import.yaml (%d objects): %v", len(objs), err)
	}
	u := objs[0]
	u.SetNamespace(s.ns)
	ann := u.GetAnnotations()
	ann["crossplane.io/external-name"] = name
	u.SetAnnotations(ann)
	s.create(u)

	mr := &namespacedv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: u.GetName()}}
	s.eventually("imported Widget Ready", func() error { return s.managedReady(mr) })
	if mr.Status.AtProvider.ID != before.ID {
		t.Errorf("status.atProvider.id = %q, want the widget's %q", mr.Status.AtProvider.ID, before.ID)
	}
	fp := mr.Spec.ForProvider
	if ptr.Deref(fp.Size, "") != widgetapi.SizeLarge || fp.Labels["app"] != "legacy" {
		t.Errorf("spec.forProvider = size %q labels %v, want it late-initialized from the widget (large, app=legacy)", ptr.Deref(fp.Size, ""), fp.Labels)
	}
	if mr.Status.AtProvider.Region != "eu-west-1" || mr.Spec.InitProvider.Region != nil {
		t.Errorf("status.atProvider.region = %q, spec.initProvider.region = %v; want eu-west-1 observed and the create-only region left unset", mr.Status.AtProvider.Region, mr.Spec.InitProvider.Region)
	}
	w, err := s.apiWidget(name)
	if err != nil {
		t.Fatal(err)
	}
	if w.Generation != before.Generation || w.Labels[ownerLabel] != "" {
		t.Errorf("observe-only import changed the widget: generation %d -> %d, labels %v", before.Generation, w.Generation, w.Labels)
	}

	// The review before the takeover: what full management would change.
	// The spec was late-initialized, so only the ownership labels; then a
	// spec that asks for another size says so, and changes nothing yet.
	s.eventually("import review names the ownership labels", func() error {
		return s.upToDate(mr, corev1.ConditionFalse, "WouldChange", "Switching to full management would change the widget: ownership labels: want {")
	})
	s.mergePatch(mr, `{"spec":{"forProvider":{"size":"medium"}}}`)
	s.eventually("import review names the size", func() error {
		return s.upToDate(mr, corev1.ConditionFalse, "WouldChange", `size: want "medium", have "large"`)
	})
	s.mergePatch(mr, `{"spec":{"forProvider":{"size":"large"}}}`)
	s.eventually("import review back to the ownership labels only", func() error {
		return s.upToDate(mr, corev1.ConditionFalse, "WouldChange", "Switching to full management would change the widget: ownership labels: want {")
	})
	if w, err := s.apiWidget(name); err != nil || w.Generation != before.Generation || w.Size != widgetapi.SizeLarge {
		t.Errorf("observe-only review changed the widget: %+v (error %v)", w, err)
	}

	// Step 2: take it over.
	s.mergePatch(mr, `{"spec":{"managementPolicies":["*"]}}`)
	s.eventually("widget taken over", func() error {
		w, err := s.apiWidget(name)
		if err != nil {
			return err
		}
		if w.Labels[ownerLabel] == "" {
			return errors.Errorf("widget %s has no %s label yet: %v", name, ownerLabel, w.Labels)
		}
		return s.managedReady(mr)
	})
	if after, err := s.apiWidget(name); err != nil || after.ID != before.ID || after.Size != widgetapi.SizeLarge {
		t.Errorf("after the take-over the widget is %+v (error %v), want the same widget, still large", after, err)
	}
	s.eventually("review replaced once taken over", func() error {
		return s.upToDate(mr, corev1.ConditionTrue, "Managed", "Fully managed")
	})
	// Taking over a reviewed widget is an adoption, whatever the review
	// recorded in status.
	s.eventually("AdoptedWidget event", func() error { return s.event(s.ns, mr.Name, "AdoptedWidget") })
}

// upToDate checks the import review condition UpToDate of mr.
func (s *scenario) upToDate(mr *namespacedv1beta1.Widget, status corev1.ConditionStatus, reason, msg string) error {
	if err := s.get(mr); err != nil {
		return err
	}
	c := mr.GetCondition("UpToDate")
	if c.Status != status || string(c.Reason) != reason || !strings.Contains(c.Message, msg) {
		return errors.Errorf("Widget %s UpToDate=%s (%s): %q, want %s (%s) mentioning %q", mr.Name, c.Status, c.Reason, c.Message, status, reason, msg)
	}
	return nil
}

// composedWidget returns the namespaced Widget an XWidget composed.
func (s *scenario) composedWidget(xr *unstructured.Unstructured) *namespacedv1beta1.Widget {
	s.t.Helper()
	l := &namespacedv1beta1.WidgetList{}
	if err := suite.kube.List(s.ctx, l, client.InNamespace(xr.GetNamespace()), client.MatchingLabels{"crossplane.io/composite": xr.GetName()}); err != nil {
		s.t.Fatal(err)
	}
	if len(l.Items) != 1 {
		s.t.Fatalf("XWidget %s composed %d Widgets, want 1", xr.GetName(), len(l.Items))
	}
	return &l.Items[0]
}

// managedReady refreshes mr and returns nil when it is Synced and Ready.
func (s *scenario) managedReady(mr *namespacedv1beta1.Widget) error {
	if err := s.get(mr); err != nil {
		return err
	}
	for _, ct := range []xpv2.ConditionType{xpv2.TypeSynced, xpv2.TypeReady} {
		if c := mr.GetCondition(ct); c.Status != "True" {
			return errors.Errorf("Widget %s/%s: %s=%s (%s): %s", mr.Namespace, mr.Name, ct, c.Status, c.Reason, c.Message)
		}
	}
	return nil
}

// namespacedProviderConfig creates the example namespaced ProviderConfig
// (examples/provider/providerconfig.yaml) in the scenario's namespace,
// pointed at the suite's Widget API.
func (s *scenario) namespacedProviderConfig() {
	s.t.Helper()
	objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "provider", "providerconfig.yaml"))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, u := range objs {
		u.SetNamespace(s.ns)
		switch u.GetKind() {
		case "Secret":
			s.set(u, apiToken, "stringData", "token")
		default:
			s.set(u, suite.widgets.URL, "spec", "endpoint")
		}
		s.create(u)
	}
}
