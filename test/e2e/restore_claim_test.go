//go:build linux

package e2e_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestRestoreClaimTouchesNoWidget follows docs/restore.md#claims for a
// WidgetClaim: its legacy XWidget and managed resources are cluster-scoped,
// and their connection Secrets are in Crossplane's namespace. Back up the
// claim, its XWidget, its managed resources and the Secrets of all of them,
// lose them, restore them paused and resume them in order: the claim is
// Ready again, its app's key still works, and the Widget API's change feed
// shows no change of its widget or keys.
func TestRestoreClaimTouchesNoWidget(t *testing.T) {
	s := newScenario(t, true)
	c := s.claim("restored", map[string]any{"keys": int64(1), "writeConnectionSecretToRef": map[string]any{"name": "restored-claim"}})
	s.create(c)
	s.waitReady(c)
	before := s.connectionSecret(s.ns, "restored-claim", 1)
	widget := string(before["widget"])
	keysBefore := s.keyIDs(widget)
	widgetsBefore := s.widgetIDs()
	feed, err := suite.api.Changes(s.ctx, widgetapi.ChangesOptions{After: widgetapi.FromLatest})
	if err != nil {
		t.Fatal(err)
	}

	backup, xrSecret := s.claimBackup(c)
	t.Logf("backed up %s; left out the XWidget's Secret %s/%s", describeObjects(backup), xrSecret.GetNamespace(), xrSecret.GetName())
	s.lose(append(backup, xrSecret))
	s.restore(backup)

	s.waitReady(c)
	after := s.connectionSecret(s.ns, "restored-claim", 1)
	for _, k := range []string{"key-0", "key-0-name", "widget", "endpoint"} {
		if string(after[k]) != string(before[k]) {
			t.Errorf("the claim's connection Secret after the restore: %s changed", k)
		}
	}
	if k, err := suite.api.VerifyKey(s.ctx, widget, string(after["key-0"])); err != nil || k.Name != string(after["key-0-name"]) {
		t.Errorf("the app's key-0 after the restore: %v (key %v); want the key it held before, still valid", err, k)
	}
	if got := s.keyIDs(widget); !slices.Equal(got, keysBefore) {
		t.Errorf("keys of widget %s after the restore: %v, before %v; want the same keys", widget, got, keysBefore)
	}
	if got := s.widgetIDs(); !slices.Equal(got, widgetsBefore) {
		t.Errorf("the scenario's widgets after the restore: %v, before %v; want the same widgets, none new", got, widgetsBefore)
	}
	if changes := s.changesOf(feed.LatestSeq, widget); len(changes) > 0 {
		t.Errorf("the Widget API's change feed shows %d changes of widget %s during backup and restore, want none: %s", len(changes), widget, strings.Join(changes, "; "))
	}
	t.Logf("MEASURED claim restore: widget %s and its %d keys kept, 0 changes in the Widget API's feed", widget, len(keysBefore))
}

// claimBackup is what docs/restore.md#claims backs up for claim c, in the
// order a restore applies it: the Secrets (the claim's, and its managed
// resources' in Crossplane's namespace), the cluster-scoped managed
// resources the claim's labels name, the legacy XWidget, and the claim. It
// also returns the XWidget's connection Secret, which a restore leaves out:
// Crossplane writes it again from the managed resources' Secrets, and copies
// to the claim only a Secret the XWidget controls, which a restored one is
// not ("cannot establish control of existing connection secret").
func (s *scenario) claimBackup(c *unstructured.Unstructured) (backup []*unstructured.Unstructured, xrSecret *unstructured.Unstructured) {
	s.t.Helper()
	if err := s.get(c); err != nil {
		s.t.Fatal(err)
	}
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion(claimAPIVersion)
	xr.SetKind(legacyXRKind)
	xr.SetName(nested(c, "spec", "resourceRef", "name"))
	if err := s.get(xr); err != nil {
		s.t.Fatalf("cannot back up the claim's XWidget %q: %v", xr.GetName(), err)
	}
	var mrs []*unstructured.Unstructured
	for _, kind := range []string{"Widget", "WidgetKey"} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: "widget.widgetco.io", Version: "v1beta1", Kind: kind + "List"})
		if err := suite.kube.List(s.ctx, l, client.MatchingLabels{"crossplane.io/claim-namespace": s.ns, "crossplane.io/claim-name": c.GetName()}); err != nil {
			s.t.Fatalf("cannot back up the claim's %ss: %v", kind, err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			u.SetAPIVersion("widget.widgetco.io/v1beta1")
			u.SetKind(kind)
			mrs = append(mrs, u)
		}
	}
	if len(mrs) < 2 {
		s.t.Fatalf("found %d managed resources of claim %s, want its Widget and its WidgetKey", len(mrs), c.GetName())
	}
	secrets := make([]*unstructured.Unstructured, 0, len(mrs)+1)
	for _, o := range append([]*unstructured.Unstructured{xr, c}, mrs...) {
		ref := secretRef(o.Object)
		if ref.Name == "" {
			continue
		}
		if ref.Namespace == "" {
			ref.Namespace = o.GetNamespace()
		}
		sec := &unstructured.Unstructured{}
		sec.SetAPIVersion("v1")
		sec.SetKind("Secret")
		sec.SetNamespace(ref.Namespace)
		sec.SetName(ref.Name)
		if err := s.get(sec); err != nil {
			s.t.Fatalf("cannot back up Secret %s/%s of %s %s: %v", ref.Namespace, ref.Name, o.GetKind(), o.GetName(), err)
		}
		if o == xr {
			xrSecret = sec
			continue
		}
		secrets = append(secrets, sec)
	}
	if xrSecret == nil {
		s.t.Fatalf("the claim's XWidget %s has no connection Secret", xr.GetName())
	}
	return append(append(secrets, mrs...), xr, c), xrSecret
}
