//go:build linux

package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/leaks"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Team b's widget and key. They are named explicitly, so that their names -
// which team a must know to attack them - do not spell out team b's
// namespace, which must appear nowhere in team a's objects.
const (
	prizeWidget      = "hostile-tenant-prize"
	prizeKey         = "hostile-tenant-prize-ci"
	prizeLabel       = "prize-payroll-7f3a"
	prizeDescription = "team b's payroll widget 7f3a"
	prizeKeyDesc     = "team b's CI key 7f3a"
)

// TestHostileTenant gives team b (a second namespace) a Ready widget and key
// and has team a (the scenario's namespace), on the same ClusterProviderConfig
// and Widget API project, try every path to them: a key on team b's widget,
// a key adopting team b's key, cross-namespace references, an Observe-only
// import, a take-over of team b's widget, and a WidgetKey whose status
// claims team b's key's ID. Each is refused with a condition or event that
// says why, team b's widget, keys and Secret stay as they were, and nothing
// of team b's reaches team a's objects or events. Team a's own import of an
// unowned widget still works.
func TestHostileTenant(t *testing.T) {
	a := newScenario(t, true)
	b := a.neighbour("victim")

	// Team b, the normal way: a Widget and a WidgetKey that references it.
	w := b.widgetMR("prize", prizeWidget, false)
	w.Labels = map[string]string{"app": "prize"}
	w.Spec.ForProvider = commonv1beta1.WidgetParameters{
		Size:        ptr.To(widgetapi.SizeSmall),
		Labels:      map[string]string{labelScenario: b.ns, "team": prizeLabel},
		Description: ptr.To(prizeDescription),
	}
	w.Spec.InitProvider = commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")}
	k := b.keyMR("ci", prizeKey, "ci-key", namespacedv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: w.Name}})
	k.Spec.InitProvider.Description = ptr.To(prizeKeyDesc)
	b.create(w, k)
	b.eventually("team b's Widget and WidgetKey Ready", func() error {
		if err := b.ready(w); err != nil {
			return err
		}
		return b.ready(k)
	})
	b.eventually("team b's key in its connection Secret", func() error {
		sec := &corev1.Secret{}
		if err := suite.kube.Get(b.ctx, types.NamespacedName{Namespace: b.ns, Name: "ci-key"}, sec); err != nil {
			return err
		}
		if len(sec.Data["key"]) == 0 {
			return errors.Errorf("Secret %s/ci-key has no key yet", b.ns)
		}
		return nil
	})
	before, key := b.prize()
	if before.Widget.Labels[ownerLabel] != "n_"+b.ns+".prize" || len(before.Keys) != 1 || len(before.Secret) != 4 {
		t.Fatalf("team b's widget and key are not as expected before the attacks: %+v", before)
	}

	// Team a's legitimate import of a widget nobody manages.
	unowned := a.ns + "-unowned"
	free, err := suite.api.CreateWidget(a.ctx, widgetapi.CreateWidgetRequest{Name: unowned, Size: widgetapi.SizeSmall, Region: "us-east-1", Labels: map[string]string{labelScenario: a.ns}})
	if err != nil {
		t.Fatalf("cannot create widget %s in the Widget API: %v", unowned, err)
	}
	imported := a.widgetMR("import", unowned, true)

	// (a) A key on team b's widget. (b) Team b's key, by its name.
	keyOnPrize := a.keyMR("steal-key", "", "stolen-key", namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To(prizeWidget)})
	hijack := a.keyMR("hijack-key", prizeKey, "hijacked-key", namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To(prizeWidget)})
	// (c) A reference into team b's namespace that admission cannot see:
	// next to a selector and a widgetName, widgetNameRef.namespace is
	// allowed, because Crossplane writes all three when it resolves a
	// selector (and CEL cannot read the WidgetKey's own namespace).
	refAndSelector := a.keyMR("ref-and-selector", "", "", namespacedv1beta1.WidgetKeyParameters{
		WidgetName:         ptr.To(prizeWidget),
		WidgetNameRef:      &xpv2.NamespacedReference{Name: w.Name, Namespace: b.ns},
		WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"app": "none"}},
	})
	// (d) Observe-only import of team b's widget. (e) Take-over.
	peek := a.widgetMR("peek", prizeWidget, true)
	takeover := a.widgetMR("take-over", prizeWidget, false)
	takeover.Spec.ForProvider.Size = ptr.To(widgetapi.SizeLarge)
	a.create(imported, keyOnPrize, hijack, refAndSelector, peek, takeover)

	// (c) Cross-namespace references, refused at admission.
	var admission []string
	for name, tc := range map[string]struct {
		p    namespacedv1beta1.WidgetKeyParameters
		want string
	}{
		"by-ref":      {p: namespacedv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: w.Name, Namespace: b.ns}}, want: "widgetNameRef.namespace must not be set: a WidgetKey can reference only Widgets in its own namespace"},
		"by-selector": {p: namespacedv1beta1.WidgetKeyParameters{WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"app": "prize"}, Namespace: b.ns}}, want: "widgetNameSelector.namespace must not be set: a WidgetKey can select only Widgets in its own namespace"},
		"by-ref-next-to-selector": {p: namespacedv1beta1.WidgetKeyParameters{
			WidgetNameRef:      &xpv2.NamespacedReference{Name: w.Name, Namespace: b.ns},
			WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"app": "none"}},
		}, want: "widgetNameRef.namespace must not be set: a WidgetKey can reference only Widgets in its own namespace"},
	} {
		err := suite.kube.Create(a.ctx, a.keyMR(name, "", "", tc.p))
		t.Logf("Attack (c) %s: %v", name, err)
		if !kerrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("creating a WidgetKey %s into namespace %s: error %v, want it Invalid with %q", name, b.ns, err, tc.want)
		}
		if err != nil {
			admission = append(admission, err.Error())
		}
	}

	notManagedHere := []string{
		fmt.Sprintf("widget %s is not managed by a Widget in namespace %s", prizeWidget, a.ns),
		"a namespaced WidgetKey can hold keys only of widgets that a managed resource in its own namespace manages (an Observe-only import does not count)",
	}
	outside := []string{
		fmt.Sprintf("widget %s is managed by a resource outside namespace %s", prizeWidget, a.ns),
		"a namespaced Widget can manage or observe only widgets that no resource manages or that a resource in its own namespace manages",
	}
	a.refused("(a) key on team b's widget", keyOnPrize, notManagedHere...)
	a.refused("(b) team b's key by name", hijack, notManagedHere...)
	a.refused("(c) reference with a selector", refAndSelector,
		fmt.Sprintf("spec.forProvider.widgetNameRef.namespace is %q, but a namespaced resource can reference only resources in its own namespace %q", b.ns, a.ns))
	a.refused("(d) Observe-only import of team b's widget", peek, outside...)
	a.refused("(e) take-over of team b's widget", takeover, outside...)
	a.eventually("team a's import of an unowned widget Ready", func() error { return a.ready(imported) })
	if imported.Status.AtProvider.ID != free.ID {
		t.Errorf("imported Widget's status.atProvider.id = %q, want the unowned widget's %q", imported.Status.AtProvider.ID, free.ID)
	}

	// Nothing of team b's was copied to team a.
	for _, mr := range []*namespacedv1beta1.Widget{peek, takeover} {
		if diff := cmp.Diff(commonv1beta1.WidgetObservation{}, mr.Status.AtProvider); diff != "" {
			t.Errorf("Widget %s/%s status.atProvider: -want, +got:\n%s", mr.Namespace, mr.Name, diff)
		}
	}
	if diff := cmp.Diff(commonv1beta1.WidgetParameters{}, peek.Spec.ForProvider); diff != "" {
		t.Errorf("Observe-only Widget %s/%s spec.forProvider was late-initialized from team b's widget: -want, +got:\n%s", peek.Namespace, peek.Name, diff)
	}
	for _, mr := range []*namespacedv1beta1.WidgetKey{keyOnPrize, hijack, refAndSelector} {
		if diff := cmp.Diff(commonv1beta1.WidgetKeyObservation{}, mr.Status.AtProvider); diff != "" {
			t.Errorf("WidgetKey %s/%s status.atProvider: -want, +got:\n%s", mr.Namespace, mr.Name, diff)
		}
	}
	if got := a.secretNames(); len(got) != 0 {
		t.Errorf("team a's namespace holds Secrets %v, want none: no attack may publish connection details", got)
	}
	traces := b.traces(before, key)
	for _, e := range admission {
		// The request named team b's namespace; the answer need not.
		for _, l := range leaks.NewScanner(traces[1:]...).Text("admission error", []byte(e)) {
			t.Errorf("%s of team b's appears in %s", l.Canary, l.Where)
		}
	}
	a.noTraces(traces, refAndSelector.Name)

	// (b) Deleting the WidgetKey that named team b's key revokes nothing;
	// neither does deleting the others.
	for _, o := range []client.Object{hijack, keyOnPrize, refAndSelector, peek, takeover, imported} {
		if err := suite.kube.Delete(a.ctx, o); err != nil {
			t.Fatalf("cannot delete %s: %v", o.GetName(), err)
		}
	}
	a.eventually("team a's resources deleted", func() error {
		for _, o := range []client.Object{hijack, keyOnPrize, refAndSelector, peek, takeover, imported} {
			if err := a.gone(o); err != nil {
				return err
			}
		}
		return nil
	})
	a.noTraces(traces, refAndSelector.Name)
	a.forgedKeyID(before)
	if after, _ := b.prize(); !cmp.Equal(before, after) {
		t.Errorf("team b's widget, keys or connection Secret changed after team a's attacks: -before, +after:\n%s", cmp.Diff(before, after))
	}
	if got, err := a.apiWidget(unowned); err != nil || got.ID != free.ID || got.Labels[ownerLabel] != "" {
		t.Errorf("after deleting the Observe-only import, widget %s is %+v (error %v), want it untouched", unowned, got, err)
	}

	// Team b still manages its own: deleting revokes the key and the widget.
	for _, o := range []client.Object{k, w} {
		if err := suite.kube.Delete(b.ctx, o); err != nil {
			t.Fatalf("cannot delete %s: %v", o.GetName(), err)
		}
	}
	b.eventually("team b's widget deleted", func() error {
		if _, err := b.apiWidget(prizeWidget); !widgetapi.IsNotFound(err) {
			return errors.Errorf("widget %s still exists (get: %v)", prizeWidget, err)
		}
		return nil
	})
}

// forgedKeyID is attack (f): a WidgetKey that names team b's key, whose
// status claims the key's ID. Whoever may edit managed resources in a
// namespace (crossplane-edit) may write their status as well as their spec;
// suppose team a learned the ID. The WidgetKey carries the managed
// reconciler's finalizer (anyone may set it) and is paused until it is being
// deleted, so that the provider first reads it with the ID in place and
// being deleted. The delete revokes nothing, and an event on the WidgetKey
// says why.
func (s *scenario) forgedKeyID(before prizeState) {
	s.t.Helper()
	id, _, _ := strings.Cut(before.Keys[prizeKey], " ")
	forged := s.keyMR("forged-id", prizeKey, "", namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To(prizeWidget)})
	forged.Annotations["crossplane.io/paused"] = "true"
	forged.Finalizers = []string{"finalizer.managedresource.crossplane.io"}
	// kube-apiserver warns of the finalizer's name (it has no path) on
	// every write; the suite's client would log each with a stack trace
	// (no logger is set).
	cfg := rest.CopyConfig(suite.c.RESTConfig())
	cfg.WarningHandler = rest.NoWarnings{}
	quiet, err := client.New(cfg, client.Options{Scheme: suite.kube.Scheme()})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := quiet.Create(s.ctx, forged); err != nil {
		s.t.Fatalf("cannot create WidgetKey %s: %v", forged.Name, err)
	}
	if err := quiet.Status().Patch(s.ctx, forged, client.RawPatch(types.MergePatchType, []byte(`{"status":{"atProvider":{"id":"`+id+`"}}}`))); err != nil {
		s.t.Fatalf("cannot write the status of WidgetKey %s: %v", forged.Name, err)
	}
	if err := quiet.Delete(s.ctx, forged); err != nil {
		s.t.Fatalf("cannot delete WidgetKey %s: %v", forged.Name, err)
	}
	if err := s.get(forged); err != nil || forged.Status.AtProvider.ID != id || forged.GetDeletionTimestamp() == nil {
		s.t.Fatalf("WidgetKey %s before it is unpaused: status.atProvider.id is team b's key's: %t, being deleted: %t (get: %v); want both", forged.Name, forged.Status.AtProvider.ID == id, forged.GetDeletionTimestamp() != nil, err)
	}
	if err := quiet.Patch(s.ctx, forged, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crossplane.io/paused":null}}}`))); err != nil {
		s.t.Fatalf("cannot unpause WidgetKey %s: %v", forged.Name, err)
	}
	s.eventually("(f) WidgetKey with team b's key ID in its status deleted", func() error { return s.gone(forged) })
	// Before the provider trusted only the owner marker, the delete revoked
	// team b's key, and team b's WidgetKey made a new one under its name.
	if k, err := suite.api.GetKey(s.ctx, prizeWidget, prizeKey); err != nil || k.ID != id {
		s.t.Fatalf("attack (f): after WidgetKey %s, whose status claimed the ID of team b's key %s, was deleted, the key is not the one it was (same ID: %t, get: %v); want it untouched", forged.Name, prizeKey, err == nil && k.ID == id, err)
	}
	s.eventually("(f) an event saying why no key was revoked", func() error { return s.event(s.ns, forged.Name, "KeyNotRevoked") })
	s.t.Logf("Attack (f) key ID forged in status: %s/%s deleted, team b's key is still there", s.ns, forged.Name)
}

// neighbour creates a second namespace for a scenario, named after the
// scenario's with a suffix, and returns a scenario in it. The namespace is
// deleted when the test passes (a failed test's stays, for diagnostics).
func (s *scenario) neighbour(suffix string) *scenario {
	s.t.Helper()
	n := &scenario{t: s.t, ctx: s.ctx, ns: s.ns + "-" + suffix}
	if err := platform.EnsureNamespace(s.ctx, suite.c.Client(), n.ns); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if s.t.Failed() || suite.ctx.Err() != nil {
			return
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}
		if err := suite.kube.Delete(suite.ctx, ns); err != nil && !kerrors.IsNotFound(err) {
			s.t.Errorf("cannot delete namespace %s: %v", n.ns, err)
		}
	})
	return n
}

// widgetMR returns a Widget in the scenario's namespace on the default
// ClusterProviderConfig, with an external name unless it is empty, and
// Observe-only when observe is true.
func (s *scenario) widgetMR(name, externalName string, observe bool) *namespacedv1beta1.Widget {
	mr := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec:       namespacedv1beta1.WidgetSpec{ManagedResourceSpec: defaultMRSpec("")},
	}
	if externalName != "" {
		mr.Annotations = map[string]string{"crossplane.io/external-name": externalName}
	}
	if observe {
		mr.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	}
	return mr
}

// keyMR returns a WidgetKey in the scenario's namespace on the default
// ClusterProviderConfig, with an external name and a connection Secret
// unless they are empty.
func (s *scenario) keyMR(name, externalName, secret string, p namespacedv1beta1.WidgetKeyParameters) *namespacedv1beta1.WidgetKey {
	mr := &namespacedv1beta1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec:       namespacedv1beta1.WidgetKeySpec{ManagedResourceSpec: defaultMRSpec(secret), ForProvider: p},
	}
	if externalName != "" {
		mr.Annotations = map[string]string{"crossplane.io/external-name": externalName}
	}
	return mr
}

func defaultMRSpec(secret string) xpv2.ManagedResourceSpec {
	s := xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}}
	if secret != "" {
		s.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: secret}
	}
	return s
}

// A managed is a managed resource with conditions.
type managed interface {
	client.Object
	GetCondition(xpv2.ConditionType) xpv2.Condition
}

// ready refreshes mr and returns nil when it is Synced and Ready.
func (s *scenario) ready(mr managed) error {
	if err := s.get(mr); err != nil {
		return err
	}
	for _, ct := range []xpv2.ConditionType{xpv2.TypeSynced, xpv2.TypeReady} {
		if c := mr.GetCondition(ct); c.Status != corev1.ConditionTrue {
			return errors.Errorf("%T %s/%s: %s=%s (%s): %s", mr, mr.GetNamespace(), mr.GetName(), ct, c.Status, c.Reason, c.Message)
		}
	}
	return nil
}

// refused waits for mr to be Synced=False with a message that holds every
// phrase, logs the message, and fails the test when mr is Ready.
func (s *scenario) refused(attack string, mr managed, phrases ...string) {
	s.t.Helper()
	var c xpv2.Condition
	s.eventually(attack+": "+mr.GetName()+" Synced=False, saying why", func() error {
		if err := s.get(mr); err != nil {
			return err
		}
		c = mr.GetCondition(xpv2.TypeSynced)
		if c.Status != corev1.ConditionFalse {
			return errors.Errorf("Synced=%s (%s): %s", c.Status, c.Reason, c.Message)
		}
		for _, p := range phrases {
			if !strings.Contains(c.Message, p) {
				return errors.Errorf("Synced=False message %q lacks %q", c.Message, p)
			}
		}
		return nil
	})
	s.t.Logf("Attack %s: %s/%s Synced=False (%s): %s", attack, mr.GetNamespace(), mr.GetName(), c.Reason, c.Message)
	if r := mr.GetCondition(xpv2.TypeReady); r.Status == corev1.ConditionTrue {
		s.t.Errorf("attack %s: %s/%s is Ready=True, want it never Ready", attack, mr.GetNamespace(), mr.GetName())
	}
}

// prizeState is what team b has in the Widget API and its connection
// Secret. The Secret's values are fingerprints, so a diff never prints them.
type prizeState struct {
	Widget struct {
		ID          string
		Endpoint    string
		Generation  int64
		Labels      map[string]string
		Description string
	}
	// Keys maps each key's name to its ID and description.
	Keys map[string]string
	// Secret maps each key of the connection Secret to its value's
	// fingerprint.
	Secret map[string]string
}

// prize reads team b's widget and keys from the Widget API and its key's
// connection Secret, and returns them and the key's secret.
func (s *scenario) prize() (prizeState, string) {
	s.t.Helper()
	var p prizeState
	w, err := s.apiWidget(prizeWidget)
	if err != nil {
		s.t.Fatalf("cannot get team b's widget %s: %v", prizeWidget, err)
	}
	p.Widget.ID, p.Widget.Endpoint, p.Widget.Generation, p.Widget.Labels, p.Widget.Description = w.ID, w.Endpoint, w.Generation, w.Labels, w.Description
	l, err := suite.api.ListKeys(s.ctx, prizeWidget)
	if err != nil {
		s.t.Fatalf("cannot list the keys of team b's widget %s: %v", prizeWidget, err)
	}
	p.Keys = map[string]string{}
	for _, k := range l.Items {
		p.Keys[k.Name] = k.ID + " " + k.Description
	}
	sec := &corev1.Secret{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: s.ns, Name: "ci-key"}, sec); err != nil {
		s.t.Fatalf("cannot get team b's connection Secret: %v", err)
	}
	p.Secret = map[string]string{}
	for k, v := range sec.Data {
		p.Secret[k] = leaks.Fingerprint(string(v))
	}
	return p, string(sec.Data["key"])
}

// traces are team b's data that must not reach team a. The first is team
// b's namespace.
func (s *scenario) traces(p prizeState, key string) []leaks.Canary {
	out := []leaks.Canary{
		{Kind: "namespace", Value: s.ns},
		{Kind: "widget ID", Value: p.Widget.ID},
		{Kind: "endpoint", Value: p.Widget.Endpoint},
		{Kind: "widget description", Value: prizeDescription},
		{Kind: "label", Value: prizeLabel},
		{Kind: "key description", Value: prizeKeyDesc},
		{Kind: "access key", Value: key},
	}
	for _, v := range p.Keys {
		id, _, _ := strings.Cut(v, " ")
		out = append(out, leaks.Canary{Kind: "key ID", Value: id})
	}
	return out
}

// noTraces fails the test when any of the traces appears in the scenario's
// Widgets, WidgetKeys or events. The object named self named team b's
// namespace itself, and so may its conditions and events; the other traces
// it may not hold either.
func (s *scenario) noTraces(traces []leaks.Canary, self string) {
	s.t.Helper()
	all, butNamespace := leaks.NewScanner(traces...), leaks.NewScanner(traces[1:]...)
	ws, ks, es := &namespacedv1beta1.WidgetList{}, &namespacedv1beta1.WidgetKeyList{}, &corev1.EventList{}
	for _, l := range []client.ObjectList{ws, ks, es} {
		if err := suite.kube.List(s.ctx, l, client.InNamespace(s.ns)); err != nil {
			s.t.Fatal(err)
		}
	}
	objs := make([]client.Object, 0, len(ws.Items)+len(ks.Items)+len(es.Items))
	for i := range ws.Items {
		objs = append(objs, &ws.Items[i])
	}
	for i := range ks.Items {
		objs = append(objs, &ks.Items[i])
	}
	for i := range es.Items {
		objs = append(objs, &es.Items[i])
	}
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			s.t.Fatal(err)
		}
		sc, about := all, o.GetName()
		if e, ok := o.(*corev1.Event); ok {
			about = e.InvolvedObject.Name
		}
		if about == self {
			sc = butNamespace
		}
		for _, l := range sc.Object(fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()), u) {
			s.t.Errorf("team b's %s appears in team a's %s", l.Canary, l.Where)
		}
	}
}

// secretNames lists the Secrets in the scenario's namespace.
func (s *scenario) secretNames() []string {
	s.t.Helper()
	l := &corev1.SecretList{}
	if err := suite.kube.List(s.ctx, l, client.InNamespace(s.ns)); err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, 0, len(l.Items))
	for _, sec := range l.Items {
		out = append(out, sec.Name)
	}
	return out
}
