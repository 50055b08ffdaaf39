//go:build linux

package e2e_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestClaimReady applies the example WidgetClaim (asking for a medium
// widget): it goes Ready, its connection Secret holds the endpoint and the
// key, and the widget exists in the Widget API as asked.
func TestClaimReady(t *testing.T) {
	s := newScenario(t, true)
	c := s.example("legacy/claim.yaml")
	s.set(c, "medium", "spec", "size")
	s.create(c)
	took := s.waitReady(c)
	t.Logf("TIMING: claim Ready %s after creation", took.Round(100*time.Millisecond))

	name := status(c, "externalName")
	if name == "" {
		t.Fatalf("claim status.externalName is empty: %s", platform.StatusLine(c))
	}
	w, err := s.apiWidget(name)
	if err != nil {
		t.Fatalf("cannot get widget %s from the Widget API: %v", name, err)
	}
	if w.Size != widgetapi.SizeMedium || w.Region != "eu-west-1" || w.State != widgetapi.StateReady {
		t.Errorf("widget %s is %s in %s and %s, want medium in eu-west-1 (the claim's) and Ready", name, w.Size, w.Region, w.State)
	}
	if w.Labels["team"] != "checkout" || w.Labels["managed-by"] != "crossplane" {
		t.Errorf("widget %s has labels %v, want the claim's team=checkout and the platform's managed-by=crossplane", name, w.Labels)
	}
	if got := status(c, "endpoint"); got != w.Endpoint {
		t.Errorf("claim status.endpoint = %q, want the widget's %q", got, w.Endpoint)
	}
	ref, _, _ := unstructured.NestedString(c.Object, "spec", "writeConnectionSecretToRef", "name")
	data := s.connectionSecret(s.ns, ref, 1)
	s.checkConnectionDetails(data, w, 1)
}

// TestXWidgetReady applies the example v2 XWidget (medium, two keys): it
// goes Ready and its composed connection Secret, in its own namespace, holds
// the endpoint and both keys.
func TestXWidgetReady(t *testing.T) {
	s := newScenario(t, true)
	xr := s.example("namespaced/xr.yaml")
	s.create(xr)
	took := s.waitReady(xr)
	t.Logf("TIMING: XWidget Ready %s after creation", took.Round(100*time.Millisecond))

	name := status(xr, "externalName")
	w, err := s.apiWidget(name)
	if err != nil {
		t.Fatalf("cannot get widget %q from the Widget API: %v", name, err)
	}
	if w.Size != widgetapi.SizeMedium || w.State != widgetapi.StateReady {
		t.Errorf("widget %s is %s and %s, want medium and Ready", name, w.Size, w.State)
	}
	if got := status(xr, "keysReady"); got != "2/2" {
		t.Errorf("XWidget status.keysReady = %q, want 2/2", got)
	}
	secret := status(xr, "connectionSecretName")
	if secret == "" {
		t.Fatalf("XWidget status.connectionSecretName is empty: %s", platform.StatusLine(xr))
	}
	data := s.connectionSecret(s.ns, secret, 2)
	s.checkConnectionDetails(data, w, 2)

	// The managed resources are namespaced, in the XWidget's namespace.
	l := &namespacedv1beta1.WidgetList{}
	if err := suite.kube.List(s.ctx, l, client.InNamespace(s.ns), client.MatchingLabels{"crossplane.io/composite": xr.GetName()}); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || externalName(&l.Items[0]) != name {
		t.Errorf("namespaced Widgets of the XWidget: %d, want 1 with external name %s", len(l.Items), name)
	}
}

// TestInvalidClaim asks for a size the platform's policy does not allow:
// the claim says which field to change and what is allowed, and nothing is
// created in the Widget API. Following the advice makes it Ready.
func TestInvalidClaim(t *testing.T) {
	s := newScenario(t, true)
	c := s.claim("too-big", map[string]any{"size": "large", "keys": int64(0)})
	s.create(c)
	var cond platform.Condition
	s.eventually("claim reports the policy violation", func() error {
		if err := s.get(c); err != nil {
			return err
		}
		cond = platform.GetCondition(c, "PolicyCompliant")
		if cond.Status != "False" {
			return notYet(c)
		}
		return nil
	})
	t.Logf("Claim condition: %s: %s", cond, cond.Message)
	if cond.Reason != "PolicyViolation" {
		t.Errorf("PolicyCompliant reason = %q, want PolicyViolation", cond.Reason)
	}
	for _, want := range []string{"spec.size", `"large"`, `"small"`, `"medium"`} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("PolicyCompliant message %q does not mention %s: it must say which field to change and what is allowed", cond.Message, want)
		}
	}
	if r := platform.GetCondition(c, "Ready"); r.Status == "True" {
		t.Errorf("claim is Ready=True despite violating the policy")
	}
	if ws, err := s.scenarioWidgets(); err != nil || len(ws) != 0 {
		t.Errorf("Widget API holds %d widgets for the invalid claim (error %v), want none", len(ws), err)
	}
	mrs := &clusterv1beta1.WidgetList{}
	if err := suite.kube.List(s.ctx, mrs, client.MatchingLabels{"crossplane.io/claim-namespace": s.ns}); err != nil {
		t.Fatal(err)
	}
	if len(mrs.Items) != 0 {
		t.Errorf("%d Widget managed resources composed for the invalid claim, want none", len(mrs.Items))
	}

	s.mergePatch(c, `{"spec":{"size":"small"}}`)
	s.waitReady(c)
	if got := platform.GetCondition(c, "PolicyCompliant"); got.Status != "True" {
		t.Errorf("after fixing the size: %s, want PolicyCompliant=True", got)
	}
}

// TestResizeClaim changes a Ready claim's size: the widget is resized in
// place in the Widget API and the claim is Ready again.
func TestResizeClaim(t *testing.T) {
	s := newScenario(t, true)
	c := s.claim("resize", map[string]any{"size": "small", "keys": int64(0)})
	s.create(c)
	s.waitReady(c)
	name := status(c, "externalName")
	before, err := s.apiWidget(name)
	if err != nil {
		t.Fatal(err)
	}
	if before.Size != widgetapi.SizeSmall {
		t.Fatalf("widget %s is %s, want small", name, before.Size)
	}

	s.mergePatch(c, `{"spec":{"size":"medium"}}`)
	took := s.eventually("widget resized and claim Ready", func() error {
		if err := s.widgetState(name, widgetapi.SizeMedium); err != nil {
			return err
		}
		if err := s.get(c); err != nil {
			return err
		}
		if err := isReady(c); err != nil {
			return err
		}
		if w := platform.GetCondition(c, "WidgetReady"); w.Status != "True" {
			return notYet(c)
		}
		return nil
	})
	t.Logf("TIMING: resized and Ready %s after the claim changed", took.Round(100*time.Millisecond))
	after, err := s.apiWidget(name)
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID {
		t.Errorf("widget %s has ID %s after the resize, want %s: it was re-created instead of resized", name, after.ID, before.ID)
	}
}

// TestDeleteClaimAndXWidget deletes a Ready claim and a Ready XWidget: their
// widgets and keys disappear from the Widget API, and no managed resource or
// Secret is left behind (Crossplane relies on the garbage collector, which
// kube-controller-manager runs, to delete what an XR composed).
func TestDeleteClaimAndXWidget(t *testing.T) {
	s := newScenario(t, true)
	c := s.claim("doomed-claim", map[string]any{"keys": int64(1), "writeConnectionSecretToRef": map[string]any{"name": "doomed-claim"}})
	xr := s.xwidget("doomed-xr", map[string]any{"keys": int64(1)})
	s.create(c, xr)
	s.waitReady(c)
	s.waitReady(xr)
	s.connectionSecret(s.ns, "doomed-claim", 1)
	xrSecret := status(xr, "connectionSecretName")
	s.connectionSecret(s.ns, xrSecret, 1)

	widgets := []string{status(c, "externalName"), status(xr, "externalName")}
	keys := map[string][]string{}
	for _, w := range widgets {
		k, err := s.keyNames(w)
		if err != nil || len(k) != 1 {
			t.Fatalf("widget %s has keys %v (error %v), want 1", w, k, err)
		}
		keys[w] = k
	}
	legacyXR := &unstructured.Unstructured{}
	legacyXR.SetAPIVersion(claimAPIVersion)
	legacyXR.SetKind(legacyXRKind)
	ref, _, _ := unstructured.NestedString(c.Object, "spec", "resourceRef", "name")
	legacyXR.SetName(ref)
	if err := s.get(legacyXR); err != nil {
		t.Fatalf("cannot get the claim's XWidget %q: %v", ref, err)
	}
	// Secrets outside the scenario's namespace: the legacy XWidget's and its
	// keys', in Crossplane's namespace.
	xrSecretRef := secretRef(legacyXR.Object)
	if xrSecretRef.Name == "" {
		t.Fatalf("the claim's XWidget %s has no spec.writeConnectionSecretToRef", ref)
	}
	secrets := []client.Object{xrSecretRef}
	keyMRs := &clusterv1beta1.WidgetKeyList{}
	if err := suite.kube.List(s.ctx, keyMRs, client.MatchingLabels{"crossplane.io/claim-namespace": s.ns}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keyMRs.Items {
		if r := k.GetWriteConnectionSecretToReference(); r != nil {
			secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name}})
		}
	}
	if len(secrets) != 2 {
		t.Fatalf("found %d connection Secrets of the claim's XWidget and its keys, want 2", len(secrets))
	}

	for _, o := range []client.Object{c, xr} {
		if err := suite.kube.Delete(s.ctx, o); err != nil {
			t.Fatalf("cannot delete %s: %v", o.GetName(), err)
		}
	}
	took := s.eventually("widgets and keys gone from the Widget API", func() error {
		for _, w := range widgets {
			if _, err := s.apiWidget(w); !widgetapi.IsNotFound(err) {
				return errors.Errorf("widget %s still exists (get: %v)", w, err)
			}
			if _, err := s.keyNames(w); !widgetapi.IsNotFound(err) {
				return errors.Errorf("keys of widget %s still listed (list: %v)", w, err)
			}
		}
		return nil
	})
	t.Logf("TIMING: widgets gone from the Widget API %s after deleting the claim and the XWidget", took.Round(100*time.Millisecond))

	s.eventually("nothing left in Kubernetes", func() error {
		for _, o := range append([]client.Object{c, xr, legacyXR}, secrets...) {
			if err := s.gone(o); err != nil {
				return err
			}
		}
		return s.noLeftovers(xrSecret)
	})
	if ws, err := s.scenarioWidgets(); err != nil || len(ws) != 0 {
		t.Errorf("Widget API still holds %d widgets of the scenario (error %v)", len(ws), err)
	}
}

// noLeftovers returns nil when no managed resource of the scenario and none
// of its connection Secrets exist.
func (s *scenario) noLeftovers(secrets ...string) error {
	left := []string{}
	for _, l := range []client.ObjectList{&namespacedv1beta1.WidgetList{}, &namespacedv1beta1.WidgetKeyList{}} {
		if err := suite.kube.List(s.ctx, l, client.InNamespace(s.ns)); err != nil {
			return err
		}
		left = append(left, names(l)...)
	}
	for _, l := range []client.ObjectList{&clusterv1beta1.WidgetList{}, &clusterv1beta1.WidgetKeyList{}} {
		if err := suite.kube.List(s.ctx, l, client.MatchingLabels{"crossplane.io/claim-namespace": s.ns}); err != nil {
			return err
		}
		left = append(left, names(l)...)
	}
	sl := &corev1.SecretList{}
	if err := suite.kube.List(s.ctx, sl, client.InNamespace(s.ns)); err != nil {
		return err
	}
	for _, sec := range sl.Items {
		left = append(left, "Secret "+sec.Name)
	}
	if len(left) > 0 {
		return errors.Errorf("left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// secretRef returns the Secret an object's spec.writeConnectionSecretToRef
// names.
func secretRef(obj map[string]any) *corev1.Secret {
	ns, _, _ := unstructured.NestedString(obj, "spec", "writeConnectionSecretToRef", "namespace")
	n, _, _ := unstructured.NestedString(obj, "spec", "writeConnectionSecretToRef", "name")
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
}

// names returns "Kind name" of every item of a typed list.
func names(l client.ObjectList) []string {
	var out []string
	switch tl := l.(type) {
	case *namespacedv1beta1.WidgetList:
		for _, i := range tl.Items {
			out = append(out, "Widget "+i.Namespace+"/"+i.Name)
		}
	case *namespacedv1beta1.WidgetKeyList:
		for _, i := range tl.Items {
			out = append(out, "WidgetKey "+i.Namespace+"/"+i.Name)
		}
	case *clusterv1beta1.WidgetList:
		for _, i := range tl.Items {
			out = append(out, "Widget "+i.Name)
		}
	case *clusterv1beta1.WidgetKeyList:
		for _, i := range tl.Items {
			out = append(out, "WidgetKey "+i.Name)
		}
	}
	return out
}

// externalName returns a managed resource's external name.
func externalName(o client.Object) string {
	return o.GetAnnotations()["crossplane.io/external-name"]
}
