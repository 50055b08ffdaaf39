//go:build linux

package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// The kinds a namespace's backup holds (docs/restore.md), in the order a
// restore applies them: Secrets first, so that a WidgetKey finds its key's
// secret; managed resources before the XWidgets that compose them.
var backupKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Secret"},
	{Group: "widget.m.widgetco.io", Version: "v1beta1", Kind: "Widget"},
	{Group: "widget.m.widgetco.io", Version: "v1beta1", Kind: "WidgetKey"},
	{Group: "platform.widgetco.io", Version: "v1alpha1", Kind: "XWidget"},
}

// annotationPaused pauses an object's reconciliation by Crossplane and the
// provider.
const annotationPaused = "crossplane.io/paused"

// TestRestoreTouchesNoWidget follows docs/restore.md: back up a namespace's
// XWidgets, their managed resources and their Secrets, lose them all from
// the control plane (deleted without the provider or core acting on the
// Widget API), restore them paused, then resume the managed resources and
// then the XWidgets. From the Widget API's change feed: no widget or key of
// the namespace was created, changed or deleted; the app's key, read from
// the restored Secret, still works; everything is Ready again.
func TestRestoreTouchesNoWidget(t *testing.T) {
	s := newScenario(t, true)
	x := s.xwidget("restored", map[string]any{"keys": int64(2)})
	s.create(x)
	s.waitReady(x)
	secretName := x.GetName() + "-connection"
	before := s.connectionSecret(s.ns, secretName, 2)
	widget := string(before["widget"])
	keysBefore := s.keyIDs(widget)
	widgetsBefore := s.widgetIDs()
	s.checkControlPlane(widget)

	feed, err := suite.api.Changes(s.ctx, widgetapi.ChangesOptions{After: widgetapi.FromLatest})
	if err != nil {
		t.Fatal(err)
	}

	backup := s.backup()
	t.Logf("backed up %s", describeObjects(backup))
	s.lose(backup)
	s.restore(backup)

	s.waitReady(x)
	after := s.connectionSecret(s.ns, secretName, 2)
	for _, k := range []string{"key-0", "key-1", "widget", "endpoint"} {
		if string(after[k]) != string(before[k]) {
			t.Errorf("connection Secret %s after the restore: %s changed", secretName, k)
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
	changes := s.changesOf(feed.LatestSeq, widget)
	if len(changes) > 0 {
		t.Errorf("the Widget API's change feed shows %d changes of widget %s during backup and restore, want none: %s", len(changes), widget, strings.Join(changes, "; "))
	}
	t.Logf("MEASURED restore: widget %s and its %d keys kept, 0 changes in the Widget API's feed", widget, len(keysBefore))
}

// checkControlPlane checks that widget carries the control plane's name that
// the provider made and keeps in its namespace (crossplane-system), through
// the RBAC Crossplane's RBAC manager grants providers: a restore into this
// control plane finds the widget its own again (docs/restore.md).
func (s *scenario) checkControlPlane(widget string) {
	s.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: "crossplane-system", Name: "widget-control-plane"}, cm); err != nil {
		s.t.Fatalf("the provider kept no control plane name: %v", err)
	}
	w, err := s.apiWidget(widget)
	if err != nil {
		s.t.Fatal(err)
	}
	if got, want := w.Labels["widgetco.io/control-plane"], cm.Data["name"]; want == "" || got != want {
		s.t.Errorf("widget %s names control plane %q, want the kept name %q", widget, got, want)
	}
}

// keyIDs are the IDs of widget's keys in the Widget API, sorted.
func (s *scenario) keyIDs(widget string) []string {
	s.t.Helper()
	l, err := suite.api.ListKeys(s.ctx, widget)
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, 0, len(l.Items))
	for _, k := range l.Items {
		out = append(out, k.Name+"="+k.ID)
	}
	slices.Sort(out)
	return out
}

// widgetIDs are the names and IDs of the scenario's widgets in the Widget
// API, sorted.
func (s *scenario) widgetIDs() []string {
	s.t.Helper()
	ws, err := s.scenarioWidgets()
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Name+"="+w.ID)
	}
	slices.Sort(out)
	return out
}

// changesOf reads the project's change feed after seq and returns the
// changes of widget (or its keys), described.
func (s *scenario) changesOf(seq int64, widget string) []string {
	s.t.Helper()
	var out []string
	for {
		l, err := suite.api.Changes(s.ctx, widgetapi.ChangesOptions{After: seq, Limit: 500})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, c := range l.Changes {
			if c.Widget == widget {
				out = append(out, fmt.Sprintf("%s %s %s", c.Type, c.Widget, c.Key))
			}
			seq = c.Seq
		}
		if len(l.Changes) == 0 || seq >= l.LatestSeq {
			return out
		}
	}
}

// backup lists the scenario namespace's objects of backupKinds, as a backup
// tool or kubectl get -o yaml exports them.
func (s *scenario) backup() []*unstructured.Unstructured {
	s.t.Helper()
	var out []*unstructured.Unstructured
	for _, gvk := range backupKinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := suite.kube.List(s.ctx, l, client.InNamespace(s.ns)); err != nil {
			s.t.Fatalf("cannot back up %ss: %v", gvk.Kind, err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			u.SetGroupVersionKind(gvk)
			out = append(out, u)
		}
	}
	return out
}

// lose removes the backed-up objects from the control plane as losing it
// would, without anything acting on the Widget API: each is paused first,
// then deleted with its finalizers removed. What depends on them and is not
// backed up (ProviderConfigUsages) goes with them, as with the control
// plane.
func (s *scenario) lose(objs []*unstructured.Unstructured) {
	s.t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Secret" {
			s.mergePatch(o.DeepCopy(), `{"metadata":{"annotations":{"`+annotationPaused+`":"true"}}}`)
		}
	}
	// Not before every controller has said it paused: a reconcile under
	// way would otherwise finish after the delete, and core's server-side
	// apply of an XR it no longer finds creates it again.
	for _, o := range objs {
		if o.GetKind() == "Secret" {
			continue
		}
		u := o.DeepCopy()
		s.eventually(o.GetKind()+" "+o.GetName()+" paused", func() error {
			if err := s.get(u); err != nil {
				return err
			}
			if c := platform.GetCondition(u, "Synced"); c.Reason != "ReconcilePaused" {
				return errors.Errorf("Synced is %s (%s)", c.Status, c.Reason)
			}
			return nil
		})
	}
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i].DeepCopy()
		if err := suite.kube.Delete(s.ctx, o); err != nil && !kerrors.IsNotFound(err) {
			s.t.Fatalf("cannot delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if err := suite.kube.Patch(s.ctx, o, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil && !kerrors.IsNotFound(err) {
			s.t.Fatalf("cannot remove the finalizers of %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	s.eventually("the backed-up objects gone", func() error {
		for _, o := range objs {
			if err := s.gone(o.DeepCopy()); err != nil {
				return err
			}
		}
		return nil
	})
}

// restore applies the backup as docs/restore.md says: everything as it was
// but for what the API server assigns, managed resources, XWidgets and
// claims paused; then it resumes the managed resources, waits until they are
// Ready, and resumes the XWidgets, then the claims.
func (s *scenario) restore(objs []*unstructured.Unstructured) {
	s.t.Helper()
	var paused []*unstructured.Unstructured
	for _, o := range objs {
		r := restorable(o)
		if r.GetKind() != "Secret" {
			meta := r.GetAnnotations()
			if meta == nil {
				meta = map[string]string{}
			}
			meta[annotationPaused] = "true"
			r.SetAnnotations(meta)
			paused = append(paused, r)
		}
		if err := suite.kube.Create(s.ctx, r); err != nil {
			s.t.Fatalf("cannot restore %s %s: %v", r.GetKind(), r.GetName(), err)
		}
	}
	resume := func(kinds ...string) {
		for _, r := range paused {
			if slices.Contains(kinds, r.GetKind()) {
				s.mergePatch(r, `{"metadata":{"annotations":{"`+annotationPaused+`":null}}}`)
			}
		}
	}
	resume("Widget", "WidgetKey")
	for _, r := range paused {
		if r.GetKind() == "Widget" || r.GetKind() == "WidgetKey" {
			s.waitReady(r)
		}
	}
	resume("XWidget")
	resume("WidgetClaim")
}

// restorable is o as a restore creates it: without what the API server
// assigns (uid, resourceVersion, timestamps, managed fields), its status,
// its finalizers and its owners, whose uids a restore cannot keep.
func restorable(o *unstructured.Unstructured) *unstructured.Unstructured {
	r := o.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "ownerReferences", "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(r.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(r.Object, "status")
	if a := r.GetAnnotations(); a != nil {
		delete(a, annotationPaused)
		r.SetAnnotations(a)
	}
	return r
}

func describeObjects(objs []*unstructured.Unstructured) string {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	parts := make([]string, 0, len(n))
	for _, k := range backupKinds {
		parts = append(parts, fmt.Sprintf("%d %s", n[k.Kind], k.Kind))
	}
	return strings.Join(parts, ", ")
}
