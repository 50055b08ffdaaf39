//go:build linux

package e2e_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestAdoptThroughXWidget is the app team's day two: a widget created
// directly in the Widget API is adopted through an XWidget (a review that
// changes nothing, then a takeover that repairs it and creates the XWidget's
// own key), kept when the XWidget is deleted (released: unmarked and
// reserved for its namespace), adopted again from another namespace once
// the platform team removes the reservation; then the first team tries to adopt the
// other team's widget and is refused without learning who owns it, and the
// adopted name cannot be changed.
func TestAdoptThroughXWidget(t *testing.T) {
	s := newScenario(t, true)
	name := s.ns + "-legacy"
	w, err := suite.api.CreateWidget(s.ctx, widgetapi.CreateWidgetRequest{Name: name, Size: widgetapi.SizeSmall, Region: "us-east-1",
		Labels: map[string]string{"app": "legacy", labelScenario: s.ns}, Description: "The legacy web tier"})
	if err != nil {
		t.Fatal(err)
	}
	s.eventually("widget "+name+" Ready", func() error { return s.widgetState(name, widgetapi.SizeSmall) })
	// A key someone made directly: adoption must never revoke it.
	if _, err := suite.api.CreateKey(s.ctx, name, widgetapi.CreateKeyRequest{Name: name + "-old"}); err != nil {
		t.Fatal(err)
	}

	// Review: the XWidget reports what managing the widget would change,
	// and nothing is changed.
	xr := s.xwidget("adopter", map[string]any{"size": "medium", "keys": int64(1),
		"adopt": map[string]any{"name": name, "mode": "Review"}})
	s.create(xr)
	c := s.condition(xr, "Adopted", func(c platform.Condition) bool { return c.Reason == "WouldChange" })
	t.Logf("Review: Adopted=%s (%s): %s", c.Status, c.Reason, c.Message)
	if !strings.Contains(c.Message, `size: want "medium", have "small"`) {
		t.Errorf("the review does not say that the size would change: %s", c.Message)
	}
	t.Logf("Review: status.adoption.review: %s", nested(xr, "status", "adoption", "review"))
	got, err := s.apiWidget(name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != w.Generation || got.Size != widgetapi.SizeSmall || got.Labels[ownerLabel] != "" {
		t.Errorf("the review changed the widget: %+v", got)
	}

	// Manage: an edit of the same XWidget. The widget is repaired to the
	// spec and marked, and the XWidget's own key is created.
	s.mergePatch(xr, `{"spec":{"adopt":{"mode":"Manage"}}}`)
	s.waitReady(xr)
	c = s.condition(xr, "Adopted", func(c platform.Condition) bool { return c.Status == "True" })
	t.Logf("Manage: Adopted=%s (%s): %s", c.Status, c.Reason, c.Message)
	s.eventually("widget repaired and marked", func() error {
		got, err = s.apiWidget(name)
		if err != nil {
			return err
		}
		if got.Size != widgetapi.SizeMedium || !strings.HasPrefix(got.Labels[ownerLabel], "n_"+s.ns+".") {
			return errors.Errorf("widget %s is %s, owner %q", name, got.Size, got.Labels[ownerLabel])
		}
		return nil
	})
	keys, err := s.keyNames(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !slices.Contains(keys, name+"-old") {
		t.Errorf("keys of the adopted widget: %v, want the old key and the XWidget's own", keys)
	}

	// Keep: the XWidget goes, the widget stays, released.
	s.mergePatch(xr, `{"spec":{"onDelete":"KeepWidget"}}`)
	s.eventually("status.onDelete KeepWidget", func() error {
		if err := s.get(xr); err != nil {
			return err
		}
		if v := status(xr, "onDelete"); v != "KeepWidget" {
			return errors.Errorf("status.onDelete = %q", v)
		}
		return nil
	})
	if err := suite.kube.Delete(s.ctx, xr); err != nil {
		t.Fatal(err)
	}
	s.eventually("XWidget gone", func() error { return s.gone(xr) })
	s.eventually("widget kept and released", func() error {
		got, err = s.apiWidget(name)
		if err != nil {
			return err
		}
		if got.State == widgetapi.StateDeleting || got.Labels[ownerLabel] != "" {
			return errors.Errorf("widget %s is %s, owner %q", name, got.State, got.Labels[ownerLabel])
		}
		return nil
	})
	s.eventually("the XWidget's key revoked, the old key kept", func() error {
		keys, err = s.keyNames(name)
		if err != nil {
			return err
		}
		if !slices.Equal(keys, []string{name + "-old"}) {
			return errors.Errorf("keys %v", keys)
		}
		return nil
	})
	t.Logf("Keep: after the delete, widget %s is %s, %s, owner marker %q; keys %v", name, got.State, got.Size, got.Labels[ownerLabel], keys)

	// The platform team removes the reservation; another namespace adopts
	// the released widget.
	if got.Labels[commonv1beta1.OwnershipLabelPrefix+"released-by"] != s.ns {
		t.Errorf("the released widget is not reserved for namespace %s: labels %v", s.ns, got.Labels)
	}
	unreserved := maps.Clone(got.Labels)
	delete(unreserved, commonv1beta1.OwnershipLabelPrefix+"released-by")
	if _, err := suite.api.ReplaceWidget(s.ctx, name, widgetapi.ReplaceWidgetRequest{Size: got.Size, Labels: unreserved, Description: got.Description}); err != nil {
		t.Fatal(err)
	}
	b := s.neighbour("b")
	xb := b.xwidget("adopter", map[string]any{"size": "medium", "keys": int64(0),
		"adopt": map[string]any{"name": name, "mode": "Manage"}})
	b.create(xb)
	b.waitReady(xb)
	s.eventually("team b owns the widget", func() error {
		got, err = s.apiWidget(name)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(got.Labels[ownerLabel], "n_"+b.ns+".") {
			return errors.Errorf("owner %q", got.Labels[ownerLabel])
		}
		return nil
	})

	// Hostile: team a tries to adopt team b's widget.
	thief := s.xwidget("thief", map[string]any{"keys": int64(1), "adopt": map[string]any{"name": name, "mode": "Manage"}})
	s.create(thief)
	c = s.condition(thief, "PolicyCompliant", func(c platform.Condition) bool { return c.Reason == "AdoptionRefused" })
	t.Logf("Hostile: PolicyCompliant=%s (%s): %s", c.Status, c.Reason, c.Message)
	if !strings.Contains(c.Message, "spec.adopt.name") || strings.Contains(c.Message, b.ns) {
		t.Errorf("the refusal must name the field and not the owner's namespace %s: %s", b.ns, c.Message)
	}
	if after, err := s.apiWidget(name); err != nil || after.Generation != got.Generation || after.Labels[ownerLabel] != got.Labels[ownerLabel] {
		t.Errorf("the refused adoption changed the widget: %+v, %v", after, err)
	}

	// The adopted name cannot change.
	err = suite.kube.Patch(s.ctx, xb, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"adopt":{"name":"`+name+`-other"}}}`)))
	t.Logf("Rename: %v", err)
	if err == nil || !strings.Contains(err.Error(), "adopt.name cannot be set, changed or removed") {
		t.Errorf("changing spec.adopt.name: want a refusal from the XRD, got %v", err)
	}
}

// condition waits until u's condition of type typ satisfies ok, and returns
// it.
func (s *scenario) condition(u *unstructured.Unstructured, typ string, ok func(platform.Condition) bool) platform.Condition {
	s.t.Helper()
	var c platform.Condition
	s.eventually(u.GetKind()+" "+platform.Name(u)+" "+typ, func() error {
		if err := s.get(u); err != nil {
			return err
		}
		c = platform.GetCondition(u, typ)
		if !ok(c) {
			return errors.Errorf("%s is %s (%s): %s; %s", typ, c.Status, c.Reason, c.Message, notYet(u))
		}
		return nil
	})
	return c
}

func nested(u *unstructured.Unstructured, fields ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, fields...)
	return v
}

// TestAdoptThroughClaim adopts a widget through a WidgetClaim, whose legacy
// XR composes a cluster-scoped Widget: the review reaches the claim, the
// takeover marks the widget as the cluster-scoped Widget's, and deleting
// the claim (onDelete unset: Delete) deletes the adopted widget.
func TestAdoptThroughClaim(t *testing.T) {
	s := newScenario(t, true)
	name := s.ns + "-legacy"
	if _, err := suite.api.CreateWidget(s.ctx, widgetapi.CreateWidgetRequest{Name: name, Size: widgetapi.SizeSmall, Region: "eu-west-1",
		Labels: map[string]string{labelScenario: s.ns}}); err != nil {
		t.Fatal(err)
	}
	c := s.claim("adopter", map[string]any{"size": "medium", "keys": int64(1), "adopt": map[string]any{"name": name}})
	s.create(c)
	cond := s.condition(c, "Adopted", func(c platform.Condition) bool { return c.Reason == "WouldChange" })
	t.Logf("Claim review: Adopted=%s (%s): %s", cond.Status, cond.Reason, cond.Message)
	if got := nested(c, "status", "adoption", "mode"); got != "Review" {
		t.Errorf("claim status.adoption.mode = %q, want Review", got)
	}
	if w, err := s.apiWidget(name); err != nil || w.Size != widgetapi.SizeSmall || w.Labels[ownerLabel] != "" {
		t.Errorf("the review changed the widget: %+v %v", w, err)
	}

	s.mergePatch(c, `{"spec":{"adopt":{"mode":"Manage"}}}`)
	s.waitReady(c)
	w, err := s.apiWidget(name)
	if err != nil || w.Size != widgetapi.SizeMedium || !strings.HasPrefix(w.Labels[ownerLabel], "c_") {
		t.Errorf("the takeover did not repair and mark the widget: %+v %v", w, err)
	}

	if err := suite.kube.Delete(s.ctx, c); err != nil {
		t.Fatal(err)
	}
	s.eventually("the adopted widget deleted with the claim", func() error {
		if _, err := s.apiWidget(name); !widgetapi.IsNotFound(err) {
			return errors.Errorf("widget %s still exists (%v)", name, err)
		}
		return nil
	})
}
