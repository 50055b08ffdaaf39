package provider_test

import (
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/providerenv"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// keepPolicies are management policies without Delete: deleting the
// resource leaves its widget.
var keepPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}

// adopting names the widget explicitly, as an adoption must.
func adopting(name string) func(*nsv1beta1.Widget) {
	return func(w *nsv1beta1.Widget) { meta.SetExternalName(w, name) }
}

func keeping(w *nsv1beta1.Widget) { w.Spec.ManagementPolicies = keepPolicies }

// deleteAndWait deletes the Widget ns/name and waits until it is gone.
func (e *env) deleteAndWait(ns, name string) {
	e.t.Helper()
	w := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := e.kube.Delete(e.ctx(), w); err != nil {
		e.t.Fatal(err)
	}
	e.eventually(60*time.Second, "Widget "+ns+"/"+name+" to go", func() (bool, string) {
		err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: ns, Name: name}, &nsv1beta1.Widget{})
		return kerrors.IsNotFound(err), "still there"
	})
}

// secondNamespace creates another namespace with its own ProviderConfig for
// the same Widget API project: another tenant sharing the project.
func (e *env) secondNamespace() string {
	ns := e.ns + "-b"
	if len(ns) > 63 {
		ns = ns[len(ns)-63:]
	}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err := providerenv.Project(e.ctx(), e.kube, ns, e.api.URL, e.token+"\n"); err != nil {
		e.t.Fatal(err)
	}
	return ns
}

// ownerOf returns the widget's ownership marker ("" for none); it fails the
// test when the widget is gone or being deleted.
func (e *env) ownerOf(name string) string {
	e.t.Helper()
	w, err := e.client().GetWidget(e.ctx(), name)
	if err != nil || w.State == widgetapi.StateDeleting {
		e.t.Fatalf("widget %s: %v %+v (orphaning must keep it)", name, err, w)
	}
	return w.Labels[ownerLabel]
}

// TestOrphanReleasesWidget: deleting a Widget whose policies keep the
// widget removes its ownership marker and reserves the widget for its
// namespace, so that a resource with another name adopts it in the same
// namespace; another namespace only once the platform team removes the
// reservation.
func TestOrphanReleasesWidget(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t)
	e.widget("uptest-w", adopting("kept-web"), keeping)
	e.waitReady("uptest-w")
	if got := e.ownerOf("kept-web"); got != "n_"+e.ns+".uptest-w" {
		t.Fatalf("owner before the delete: %q", got)
	}
	e.deleteAndWait(e.ns, "uptest-w")
	if got := e.ownerOf("kept-web"); got != "" {
		t.Errorf("owner after orphaning: want none, got %q", got)
	}
	w, _ := e.client().GetWidget(e.ctx(), "kept-web")
	if w.Labels["team"] != "a" || w.Size != "medium" || w.Labels["widgetco.io/released-by"] != e.ns {
		t.Errorf("orphaning changed more than the marker, or did not reserve the widget for %s: %+v", e.ns, w)
	}

	// Another name, same namespace: adopted.
	e.widget("other", adopting("kept-web"), keeping)
	e.waitReady("other")
	if got := e.ownerOf("kept-web"); got != "n_"+e.ns+".other" {
		t.Errorf("owner after adoption in the same namespace: %q", got)
	}
	e.deleteAndWait(e.ns, "other")

	// Another namespace: refused while the widget is reserved for the
	// namespace that released it, adopted once the platform team removes
	// the reservation.
	nsB := e.secondNamespace()
	b := &nsv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "web", Annotations: map[string]string{meta.AnnotationKeyExternalName: "kept-web"}},
		Spec:       nsv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("large")}},
	}
	b.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	e.create(b)
	e.eventually(60*time.Second, "team b to be refused the reserved widget", func() (bool, string) {
		got := &nsv1beta1.Widget{}
		if err := suite.kube.Get(e.ctx(), types.NamespacedName{Namespace: nsB, Name: "web"}, got); err != nil {
			return false, err.Error()
		}
		c := got.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "reserved for the namespace that released it"), condition(got, xpv2.TypeSynced)
	})
	if got := e.ownerOf("kept-web"); got != "" {
		t.Errorf("owner after team b's refused adoption: want none, got %q", got)
	}
	w, _ = e.client().GetWidget(e.ctx(), "kept-web")
	delete(w.Labels, "widgetco.io/released-by")
	if _, err := e.client().ReplaceWidget(e.ctx(), "kept-web", widgetapi.ReplaceWidgetRequest{Size: w.Size, Labels: w.Labels, Description: w.Description}); err != nil {
		t.Fatalf("cannot remove the reservation: %v", err)
	}
	e.eventually(60*time.Second, "team b to adopt the orphaned widget", func() (bool, string) {
		w, err := e.client().GetWidget(e.ctx(), "kept-web")
		if err != nil {
			return false, err.Error()
		}
		return w.Labels[ownerLabel] == "n_"+nsB+".web" && w.Size == "large", w.Labels[ownerLabel] + " " + w.Size
	})
}

// TestOrphanRacesReCreate: a Widget refused because another manages its
// widget keeps retrying while that other is deleted (keeping the widget)
// and at once created again under the same name. Whichever wins, the widget
// is never deleted, exactly one resource manages it, and the loser's
// condition names the winner without telling it to delete or orphan a
// resource that no longer exists.
func TestOrphanRacesReCreate(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t)
	e.widget("first", adopting("raced"), keeping)
	e.waitReady("first")
	e.widget("second", adopting("raced"), func(w *nsv1beta1.Widget) { w.Spec.ForProvider.Size = ptr.To("large") })
	e.waitSyncedFalse("second", "already managed by namespaced managed resource "+e.ns+"/first")

	if err := e.kube.Delete(e.ctx(), e.getWidget("first")); err != nil {
		t.Fatal(err)
	}
	// Re-create "first" as soon as the API server lets us.
	e.eventually(60*time.Second, "Widget first to be created again", func() (bool, string) {
		w := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "first", Annotations: map[string]string{meta.AnnotationKeyExternalName: "raced"}},
			Spec: nsv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}}}}
		w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
		keeping(w)
		err := e.kube.Create(e.ctx(), w)
		return err == nil, "create: " + errString(err)
	})

	var winner, loser string
	e.eventually(90*time.Second, "one of first and second to manage the widget, the other refused", func() (bool, string) {
		owner := e.ownerOf("raced")
		f, s := e.getWidget("first"), e.getWidget("second")
		switch owner {
		case "n_" + e.ns + ".first":
			winner, loser = "first", "second"
		case "n_" + e.ns + ".second":
			winner, loser = "second", "first"
		default:
			return false, "owner " + owner
		}
		w, l := f, s
		if winner == "second" {
			w, l = s, f
		}
		c := l.GetCondition(xpv2.TypeSynced)
		return isTrue(w, xpv2.TypeSynced) && c.Status == corev1.ConditionFalse,
			owner + "; first: " + condition(f, xpv2.TypeSynced) + "; second: " + condition(s, xpv2.TypeSynced)
	})
	t.Logf("winner %s, loser %s", winner, loser)
	// Stable: a few more seconds change nothing.
	time.Sleep(3 * time.Second)
	if got := e.ownerOf("raced"); got != "n_"+e.ns+"."+winner {
		t.Errorf("owner moved from %s to %s", winner, got)
	}
	msg := e.getWidget(loser).GetCondition(xpv2.TypeSynced).Message
	for _, bad := range []string{"delete or orphan that resource first"} {
		if strings.Contains(msg, bad) {
			t.Errorf("the refused resource is told %q: %s", bad, msg)
		}
	}
	if !strings.Contains(msg, e.ns+"/"+winner) {
		t.Errorf("the refused resource's condition does not name the winner %s: %s", winner, msg)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestConcurrentAdoption: two Widgets of a namespace adopt the same
// unowned widget at once, as two XWidgets switched to Manage together do.
// The provider's conditional writes let exactly one take it over; the other
// is refused, and its import review says a takeover would be refused.
func TestConcurrentAdoption(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	if _, err := e.client().CreateWidget(e.ctx(), widgetapi.CreateWidgetRequest{Name: "contested", Size: "small"}); err != nil {
		t.Fatal(err)
	}
	startProvider(t)
	e.widget("one", adopting("contested"))
	e.widget("two", adopting("contested"), func(w *nsv1beta1.Widget) { w.Spec.ForProvider.Size = ptr.To("large") })

	var winner, loser string
	e.eventually(90*time.Second, "one Widget to manage the widget and the other to be refused", func() (bool, string) {
		owner := e.ownerOf("contested")
		one, two := e.getWidget("one"), e.getWidget("two")
		switch owner {
		case "n_" + e.ns + ".one":
			winner, loser = "one", "two"
		case "n_" + e.ns + ".two":
			winner, loser = "two", "one"
		default:
			return false, "owner " + owner
		}
		l := e.getWidget(loser)
		return isTrue(e.getWidget(winner), xpv2.TypeSynced) && l.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionFalse,
			owner + "; one: " + condition(one, xpv2.TypeSynced) + "; two: " + condition(two, xpv2.TypeSynced)
	})
	time.Sleep(3 * time.Second)
	if got := e.ownerOf("contested"); got != "n_"+e.ns+"."+winner {
		t.Errorf("owner moved from %s to %s", winner, got)
	}
	w, _ := e.client().GetWidget(e.ctx(), "contested")
	want := map[string]string{"one": "medium", "two": "large"}[winner]
	if w.Size != want {
		t.Errorf("widget size %s, want the winner %s's %s: the loser changed it", w.Size, winner, want)
	}
	if msg := e.getWidget(loser).GetCondition(xpv2.TypeSynced).Message; !strings.Contains(msg, "already managed by namespaced managed resource "+e.ns+"/"+winner) {
		t.Errorf("the loser's condition does not name the winner: %s", msg)
	}
}
