package provider_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/providerenv"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// The labels and annotation of docs/restore.md's migration section, spelled
// as a user reads them there.
const (
	controlPlaneLabel  = "widgetco.io/control-plane"
	contenderLabel     = "widgetco.io/contender"
	takenOverAtLabel   = "widgetco.io/taken-over-at"
	takeOverAnnotation = "widgetco.io/take-over-from"
	typeControlPlane   = xpv2.ConditionType("ControlPlane")
)

// TestTwoControlPlanes runs two control planes, each a kube-apiserver with
// its own provider-widget, against one Widget API project, as a migration
// does while both run: the second holds a copy of the first's Widget. The
// widget is never fought over: the copy writes none of its fields, each
// side reports the other, a take-over moves it once, and deleting the
// loser's resource leaves the widget alone.
func TestTwoControlPlanes(t *testing.T) {
	a := newEnv(t)
	a.providerConfig()
	// Control plane a names itself: ConfigMap widget-control-plane in the
	// provider's namespace, as in a cluster.
	startProvider(t, "--leader-election-namespace", a.ns)
	a.widget("web", func(w *nsv1beta1.Widget) { w.Spec.ForProvider.Size = ptr.To("small") })
	ext := meta.GetExternalName(a.waitReady("web"))
	cm := &corev1.ConfigMap{}
	if err := a.kube.Get(a.ctx(), types.NamespacedName{Namespace: a.ns, Name: "widget-control-plane"}, cm); err != nil {
		t.Fatalf("control plane a kept no name: %v", err)
	}
	cpA := cm.Data["name"]
	if got := a.labelsOf(ext)[controlPlaneLabel]; cpA == "" || got != cpA {
		t.Fatalf("widget %s: label %s=%q, want control plane a's kept name %q", ext, controlPlaneLabel, got, cpA)
	}

	// Control plane b: another kube-apiserver, the same namespace, token
	// and Widget, but a larger size, and its own name.
	kb, err := providerenv.StartKube(providerenv.Options{Root: filepath.Join("..", "..", ".."), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kb.Stop() })
	b := &env{t: t, kube: kb.Client, api: a.api, ns: a.ns, token: a.token}
	b.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}})
	b.providerConfig()
	before := a.widgetAPI(ext)
	b.widget("web", func(w *nsv1beta1.Widget) { w.Spec.ForProvider.Size = ptr.To("large") })
	startProviderOn(t, kb.Kubeconfig, "--control-plane", "cp-b")

	// b leaves the widget alone, says so once, and reports how to take over.
	b.waitSyncedFalse("web", "managed by control plane "+cpA)
	if msg := b.getWidget("web").GetCondition(xpv2.TypeSynced).Message; !strings.Contains(msg, takeOverAnnotation+"="+cpA) {
		t.Errorf("b's Widget does not say how to take over: %q", msg)
	}
	a.eventually(60*time.Second, "a's Widget to report b's contest", func() (bool, string) {
		c := a.getWidget("web").GetCondition(typeControlPlane)
		return c.Reason == "Contested" && strings.Contains(c.Message, "cp-b"), condition(a.getWidget("web"), typeControlPlane)
	})
	contested := a.widgetAPI(ext)
	if contested.Labels[contenderLabel] != "cp-b" || contested.Size != "small" || contested.Generation != before.Generation+1 {
		t.Fatalf("b's contest: want one write of label %s=cp-b, size small; got labels %v, size %s, generation %d -> %d", contenderLabel, contested.Labels, contested.Size, before.Generation, contested.Generation)
	}
	time.Sleep(5 * time.Second) // polls and feed events of both providers
	if now := a.widgetAPI(ext); now.Generation != contested.Generation {
		t.Errorf("the widget was written again while both ran, before any take-over: generation %d -> %d, labels %v", contested.Generation, now.Generation, now.Labels)
	}

	// b takes over: its spec applies, its label replaces a's, a stands
	// back and reports it, and does not undo it.
	b.annotate("web", takeOverAnnotation, cpA)
	b.waitReady("web")
	b.eventually(60*time.Second, "the widget to be b's", func() (bool, string) {
		w := b.widgetAPI(ext)
		return w.Labels[controlPlaneLabel] == "cp-b" && w.Size == "large" && w.Labels[takenOverAtLabel] != "", strings.Join([]string{w.Size, labelString(w.Labels)}, " ")
	})
	a.waitSyncedFalse("web", "managed by control plane cp-b")
	b.eventually(60*time.Second, "b's Widget to report a's contest", func() (bool, string) {
		c := b.getWidget("web").GetCondition(typeControlPlane)
		return c.Reason == "Contested" && strings.Contains(c.Message, cpA), condition(b.getWidget("web"), typeControlPlane)
	})
	settled := a.widgetAPI(ext)
	time.Sleep(5 * time.Second)
	if now := a.widgetAPI(ext); now.Generation != settled.Generation || now.Size != "large" {
		t.Errorf("after the take-over the widget was written again: generation %d -> %d, size %s", settled.Generation, now.Generation, now.Size)
	}

	// Deleting a's Widget (deletion policy Delete) leaves b's widget.
	a.deleteAndWait(a.ns, "web")
	if w := a.widgetAPI(ext); w.State == widgetapi.StateDeleting || w.Labels[controlPlaneLabel] != "cp-b" {
		t.Errorf("deleting control plane a's Widget touched control plane b's widget: state %s, labels %v", w.State, w.Labels)
	}
}

// startProviderOn runs the provider binary against another kube-apiserver
// until the test ends.
func startProviderOn(t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	full := append([]string{"--debug", "--poll-interval", "1m", "--feed-wait", "5s"}, args...)
	p, err := providerenv.StartProvider(suite.bin, kubeconfig, filepath.Join(t.TempDir(), "provider-b.log"), full...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("provider log (second control plane):\n%s", p.Logs())
		}
	})
}

// widgetAPI reads the widget from the Widget API.
func (e *env) widgetAPI(name string) *widgetapi.Widget {
	e.t.Helper()
	w, err := e.client().GetWidget(e.ctx(), name)
	if err != nil {
		e.t.Fatalf("cannot get widget %s: %v", name, err)
	}
	return w
}

// labelsOf returns the widget's labels.
func (e *env) labelsOf(name string) map[string]string { return e.widgetAPI(name).Labels }

// annotate sets an annotation on the Widget name.
func (e *env) annotate(name, k, v string) {
	e.t.Helper()
	w := &nsv1beta1.Widget{}
	if err := e.update(w, name, func() { meta.AddAnnotations(w, map[string]string{k: v}) }); err != nil {
		e.t.Fatal(err)
	}
}

// labelString prints labels for a wait's explanation.
func labelString(l map[string]string) string {
	parts := make([]string, 0, len(l))
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}
