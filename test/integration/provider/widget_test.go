package provider_test

import (
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

const ownerLabel = "widgetco.io/owner"

func (e *env) widget(name string, mut ...func(*nsv1beta1.Widget)) *nsv1beta1.Widget {
	w := &nsv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: nsv1beta1.WidgetSpec{
			ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}},
		},
	}
	w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	for _, m := range mut {
		m(w)
	}
	e.create(w)
	return w
}

func (e *env) getWidget(name string) *nsv1beta1.Widget {
	e.t.Helper()
	w := &nsv1beta1.Widget{}
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, w); err != nil {
		e.t.Fatalf("cannot get Widget %s: %v", name, err)
	}
	return w
}

func (e *env) waitReady(name string) *nsv1beta1.Widget {
	e.t.Helper()
	var w *nsv1beta1.Widget
	e.eventually(60*time.Second, "Widget "+name+" Ready and Synced", func() (bool, string) {
		w = e.getWidget(name)
		return isTrue(w, xpv2.TypeReady) && isTrue(w, xpv2.TypeSynced), condition(w, xpv2.TypeReady) + " " + condition(w, xpv2.TypeSynced)
	})
	return w
}

func (e *env) waitSyncedFalse(name, contains string) *nsv1beta1.Widget {
	e.t.Helper()
	var w *nsv1beta1.Widget
	e.eventually(60*time.Second, "Widget "+name+" Synced=False mentioning "+contains, func() (bool, string) {
		w = e.getWidget(name)
		c := w.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, contains), condition(w, xpv2.TypeSynced)
	})
	return w
}

func (e *env) countWidgets() int {
	e.t.Helper()
	l, err := e.client().ListWidgets(e.ctx(), widgetapi.ListWidgetsOptions{Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(l.Items)
}

// TestCreateReadyDeleteNamespaced: a namespaced Widget is created under its
// default name, goes Ready only when the API says Ready, and deleting it
// waits until the widget is gone.
func TestCreateReadyDeleteNamespaced(t *testing.T) {
	e := newEnv(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = time.Second; o.DeleteDelay = time.Second }))
	e.providerConfig()
	startProvider(t)
	e.widget("web")

	e.eventually(60*time.Second, "Creating while the API provisions", func() (bool, string) {
		w := e.getWidget("web")
		return w.GetCondition(xpv2.TypeReady).Reason == xpv2.ReasonCreating, condition(w, xpv2.TypeReady)
	})
	w := e.waitReady("web")
	if got := meta.GetExternalName(w); got != defaultName(e.ns, "web") {
		t.Errorf("external name %q, want the default %q", got, defaultName(e.ns, "web"))
	}
	api, err := e.client().GetWidget(e.ctx(), defaultName(e.ns, "web"))
	if err != nil {
		t.Fatalf("widget not in the API: %v", err)
	}
	if api.State != widgetapi.StateReady || api.Size != "medium" || api.Labels["team"] != "a" || api.Labels[ownerLabel] != "n_"+e.ns+".web" {
		t.Errorf("API widget: %+v", api)
	}
	if w.Status.AtProvider.Endpoint == "" || w.Status.AtProvider.ID != api.ID || w.Status.AtProvider.Region != "us-east-1" {
		t.Errorf("status not filled: atProvider %+v", w.Status.AtProvider)
	}
	if w.Spec.InitProvider.Region != nil {
		t.Errorf("spec.initProvider.region was filled with %q; it is the user's, for the creation only", *w.Spec.InitProvider.Region)
	}

	if err := e.kube.Delete(e.ctx(), w); err != nil {
		t.Fatal(err)
	}
	sawDeleting := false
	e.eventually(60*time.Second, "the Widget to be deleted", func() (bool, string) {
		cur := &nsv1beta1.Widget{}
		err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "web"}, cur)
		if kerrors.IsNotFound(err) {
			return true, ""
		}
		if _, err := e.client().GetWidget(e.ctx(), defaultName(e.ns, "web")); err == nil {
			sawDeleting = true
		}
		return false, condition(cur, xpv2.TypeReady)
	})
	if _, err := e.client().GetWidget(e.ctx(), defaultName(e.ns, "web")); !widgetapi.IsNotFound(err) {
		t.Errorf("the MR is gone but the widget is not: %v", err)
	}
	if !sawDeleting {
		t.Errorf("the MR never waited for the widget's asynchronous deletion")
	}
}

// TestClusterScopedAndOrphan: the cluster-scoped kind works through a
// cluster-scoped ProviderConfig, and deletionPolicy Orphan keeps the widget.
func TestClusterScopedAndOrphan(t *testing.T) {
	e := newEnv(t)
	e.tokenSecret("cluster-token")
	pcName := e.ns
	e.create(&clusterv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: pcName},
		Spec: commonv1alpha1.ProviderConfigSpec{
			APIConnection: commonv1alpha1.APIConnection{Endpoint: e.api.URL},
			Credentials: commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceSecret,
				SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Namespace: e.ns, Name: "cluster-token"}, Key: "token"}},
		},
	})
	startProvider(t)
	name := e.ns + "-cw"
	cw := &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cw.Spec.ForProvider.Size = ptr.To("large")
	cw.Spec.ProviderConfigReference = &xpv2.Reference{Name: pcName}
	cw.Spec.DeletionPolicy = xpv2.DeletionOrphan
	e.create(cw)
	e.eventually(60*time.Second, "cluster Widget Ready", func() (bool, string) {
		got := &clusterv1beta1.Widget{}
		if err := e.kube.Get(e.ctx(), types.NamespacedName{Name: name}, got); err != nil {
			return false, err.Error()
		}
		return isTrue(got, xpv2.TypeReady), condition(got, xpv2.TypeReady) + " " + condition(got, xpv2.TypeSynced)
	})
	api, err := e.client().GetWidget(e.ctx(), name)
	if err != nil || api.Size != "large" || api.Labels[ownerLabel] != "c_"+name {
		t.Fatalf("API widget %+v, err %v", api, err)
	}
	if err := e.kube.Delete(e.ctx(), cw); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the orphaned MR to go", func() (bool, string) {
		err := e.kube.Get(e.ctx(), types.NamespacedName{Name: name}, &clusterv1beta1.Widget{})
		return kerrors.IsNotFound(err), "still there"
	})
	if w, err := e.client().GetWidget(e.ctx(), name); err != nil || w.State == widgetapi.StateDeleting {
		t.Errorf("deletionPolicy Orphan deleted the widget: %v %+v", err, w)
	}
	if got := e.ownerOf(name); got != "" {
		t.Errorf("deletionPolicy Orphan left the ownership marker %q: another resource could not adopt the widget", got)
	}
}

// TestOrphanNamespacedByManagementPolicies: without the Delete action the
// widget outlives its MR.
func TestOrphanNamespacedByManagementPolicies(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t)
	w := e.widget("keep", func(w *nsv1beta1.Widget) {
		w.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}
	})
	e.waitReady("keep")
	if err := e.kube.Delete(e.ctx(), w); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the MR to go", func() (bool, string) {
		err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "keep"}, &nsv1beta1.Widget{})
		return kerrors.IsNotFound(err), "still there"
	})
	if got, err := e.client().GetWidget(e.ctx(), defaultName(e.ns, "keep")); err != nil || got.State == widgetapi.StateDeleting {
		t.Errorf("a policy without Delete deleted the widget: %v %+v", err, got)
	}
}

// TestAdoptExistingWidget: an explicit external name adopts an unowned
// widget, which is then managed; no second widget appears.
func TestAdoptExistingWidget(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	orig, err := e.client().CreateWidget(e.ctx(), widgetapi.CreateWidgetRequest{Name: "legacy-web", Size: "small", Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	startProvider(t)
	e.widget("adopter", func(w *nsv1beta1.Widget) {
		meta.SetExternalName(w, "legacy-web")
		w.Spec.ForProvider.Size = ptr.To("large")
	})
	e.eventually(60*time.Second, "the adopted widget to be resized and owned", func() (bool, string) {
		w, err := e.client().GetWidget(e.ctx(), "legacy-web")
		if err != nil {
			return false, err.Error()
		}
		return w.Size == "large" && w.Labels[ownerLabel] == "n_"+e.ns+".adopter", w.Size + " " + w.Labels[ownerLabel]
	})
	e.waitReady("adopter")
	got, _ := e.client().GetWidget(e.ctx(), "legacy-web")
	if got.ID != orig.ID {
		t.Errorf("the widget was replaced (ID %s -> %s), not adopted", orig.ID, got.ID)
	}
	if n := e.countWidgets(); n != 1 {
		t.Errorf("%d widgets in the project after adoption, want 1", n)
	}
}

// TestRefuseToStealOwnedWidget: a second MR naming a widget that another MR
// manages gets a clear error, changes nothing, and deleting it leaves the
// widget alone.
func TestRefuseToStealOwnedWidget(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t)
	e.widget("owner")
	e.waitReady("owner")
	thief := e.widget("thief", func(w *nsv1beta1.Widget) {
		meta.SetExternalName(w, defaultName(e.ns, "owner"))
		w.Spec.ForProvider.Size = ptr.To("small")
	})
	e.waitSyncedFalse("thief", "already managed by namespaced managed resource "+e.ns+"/owner")
	w, _ := e.client().GetWidget(e.ctx(), defaultName(e.ns, "owner"))
	if w.Size != "medium" {
		t.Errorf("the refused MR changed the widget: size %s", w.Size)
	}
	if err := e.kube.Delete(e.ctx(), thief); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the refused MR to go", func() (bool, string) {
		err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "thief"}, &nsv1beta1.Widget{})
		return kerrors.IsNotFound(err), "still there"
	})
	if w, err := e.client().GetWidget(e.ctx(), defaultName(e.ns, "owner")); err != nil || w.State == widgetapi.StateDeleting {
		t.Errorf("deleting the refused MR deleted the other MR's widget: %v", err)
	}
}

// TestDefaultNameDoesNotAdopt: a widget that happens to exist under an MR's
// default name is not taken over silently.
func TestDefaultNameDoesNotAdopt(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	if _, err := e.client().CreateWidget(e.ctx(), widgetapi.CreateWidgetRequest{Name: defaultName(e.ns, "clash")}); err != nil {
		t.Fatal(err)
	}
	startProvider(t)
	e.widget("clash")
	e.waitSyncedFalse("clash", "already exists and no managed resource owns it")
}

// TestObserveOnlyImport: management policy Observe imports a widget: status
// and spec are filled from the API, and the widget is not touched.
func TestObserveOnlyImport(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	orig, err := e.client().CreateWidget(e.ctx(), widgetapi.CreateWidgetRequest{Name: "imported", Size: "large", Region: "eu-west-1", Labels: map[string]string{"env": "prod"}, Description: "made by hand"})
	if err != nil {
		t.Fatal(err)
	}
	startProvider(t)
	mg := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "imported", Annotations: map[string]string{meta.AnnotationKeyExternalName: "imported"}}}
	mg.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
	mg.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	e.create(mg)
	w := e.waitReady("imported")
	p := w.Spec.ForProvider
	if ptr.Deref(p.Size, "") != "large" || p.Labels["env"] != "prod" || ptr.Deref(p.Description, "") != "made by hand" {
		t.Errorf("spec not late-initialized from the API: %+v", p)
	}
	if w.Status.AtProvider.ID != orig.ID || w.Status.AtProvider.Endpoint == "" || w.Status.AtProvider.Region != "eu-west-1" {
		t.Errorf("status not observed: %+v", w.Status.AtProvider)
	}
	// Out-of-band change: observed, never reverted.
	if _, err := e.client().PatchWidget(e.ctx(), "imported", widgetapi.PatchWidgetRequest{Description: ptr.To("edited by hand")}); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "status to follow the out-of-band change", func() (bool, string) {
		w := e.getWidget("imported")
		return w.Status.AtProvider.Description == "edited by hand", w.Status.AtProvider.Description
	})
	api, _ := e.client().GetWidget(e.ctx(), "imported")
	if api.Labels[ownerLabel] != "" || api.Description != "edited by hand" || api.Generation != 2 {
		t.Errorf("an Observe-only import modified the widget: %+v", api)
	}
}

// TestInitProviderIsUsedOnlyAtCreation: spec.initProvider's region, labels
// and description create the widget; afterwards they are neither copied to
// spec.forProvider nor enforced, so a change made in the Widget API stays
// while drift in spec.forProvider's fields is repaired. The region cannot be
// changed in the spec once set.
func TestInitProviderIsUsedOnlyAtCreation(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t)
	e.widget("placed", func(w *nsv1beta1.Widget) {
		w.Spec.ForProvider = commonv1beta1.WidgetParameters{Size: ptr.To("medium")}
		w.Spec.InitProvider = commonv1beta1.WidgetInitParameters{
			Region: ptr.To("eu-west-1"), Size: ptr.To("large"), Labels: map[string]string{"env": "prod"}, Description: ptr.To("first"),
		}
	})
	w := e.waitReady("placed")
	name := defaultName(e.ns, "placed")
	api, err := e.client().GetWidget(e.ctx(), name)
	if err != nil {
		t.Fatalf("widget not in the API: %v", err)
	}
	if api.Region != "eu-west-1" || api.Size != "medium" || api.Description != "first" || api.Labels["env"] != "prod" {
		t.Errorf("API widget %+v: want region eu-west-1 and description and labels from spec.initProvider, size medium from spec.forProvider", api)
	}
	if p := w.Spec.ForProvider; p.Labels != nil || p.Description != nil {
		t.Errorf("spec.forProvider late-initialized fields set in spec.initProvider: %+v", p)
	}

	// Out of band: a description change (not managed) and a resize (managed).
	if _, err := e.client().PatchWidget(e.ctx(), name, widgetapi.PatchWidgetRequest{Description: ptr.To("edited by hand"), Size: ptr.To("small")}); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the resize to be repaired", func() (bool, string) {
		w, err := e.client().GetWidget(e.ctx(), name)
		if err != nil {
			return false, err.Error()
		}
		return w.Size == "medium", "size " + w.Size
	})
	if api, _ := e.client().GetWidget(e.ctx(), name); api.Description != "edited by hand" || api.Region != "eu-west-1" {
		t.Errorf("the drift repair enforced spec.initProvider: description %q, region %q", api.Description, api.Region)
	}

	// The provider writes the Widget too: retry until the API server judges
	// the change rather than its resource version.
	cur := &nsv1beta1.Widget{}
	err = e.update(cur, "placed", func() { cur.Spec.InitProvider.Region = ptr.To("us-east-1") })
	if !kerrors.IsInvalid(err) || !strings.Contains(err.Error(), "region is immutable") {
		t.Errorf("changing spec.initProvider.region: got error %v, want it rejected as immutable", err)
	}
}

// TestInitProviderRegionIgnoredOnAdoption: adopting a widget whose region
// differs from spec.initProvider.region is no error: the region was for a
// creation that did not happen, so the widget is neither recreated nor moved.
func TestInitProviderRegionIgnoredOnAdoption(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	orig, err := e.client().CreateWidget(e.ctx(), widgetapi.CreateWidgetRequest{Name: "pinned", Size: "medium", Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	startProvider(t)
	e.widget("pinned", func(w *nsv1beta1.Widget) {
		meta.SetExternalName(w, "pinned")
		w.Spec.InitProvider.Region = ptr.To("eu-west-1")
	})
	w := e.waitReady("pinned")
	api, _ := e.client().GetWidget(e.ctx(), "pinned")
	if api.ID != orig.ID || api.Region != "us-east-1" || api.State == widgetapi.StateDeleting || api.Labels[ownerLabel] != "n_"+e.ns+".pinned" {
		t.Errorf("the widget was not adopted as it is: %+v", api)
	}
	if w.Status.AtProvider.Region != "us-east-1" {
		t.Errorf("status.atProvider.region %q, want the widget's us-east-1", w.Status.AtProvider.Region)
	}
}

// TestMissingTokenSecret: a ProviderConfig whose Secret is missing gives a
// clear condition, and the MR recovers when the Secret appears.
func TestMissingTokenSecret(t *testing.T) {
	e := newEnv(t)
	e.create(&nsv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "default"},
		Spec: commonv1alpha1.LocalProviderConfigSpec{
			APIConnection: commonv1alpha1.APIConnection{Endpoint: e.api.URL},
			Credentials: commonv1alpha1.LocalProviderCredentials{Source: xpv2.CredentialsSourceSecret,
				SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "late-token"}, Key: "token"}},
		},
	})
	p := startProvider(t)
	e.widget("waiting")
	e.waitSyncedFalse("waiting", "token Secret "+e.ns+"/late-token not found")
	e.tokenSecret("late-token")
	e.waitReady("waiting")
	if strings.Contains(p.logs(), e.token) {
		t.Errorf("the provider log contains the token")
	}
}

// TestProviderConfigInUseIsNotDeleted: a ProviderConfig with users stays
// (terminating) until its last managed resource is gone.
func TestProviderConfigInUseIsNotDeleted(t *testing.T) {
	e := newEnv(t)
	e.providerConfig()
	startProvider(t)
	w := e.widget("user")
	e.waitReady("user")
	pc := &nsv1alpha1.ProviderConfig{}
	key := types.NamespacedName{Namespace: e.ns, Name: "default"}
	e.eventually(60*time.Second, "the ProviderConfig to count its user", func() (bool, string) {
		if err := e.kube.Get(e.ctx(), key, pc); err != nil {
			return false, err.Error()
		}
		return pc.Status.Users == 1, fmt.Sprintf("users=%d", pc.Status.Users)
	})
	if err := e.kube.Delete(e.ctx(), pc); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "the in-use ProviderConfig to be held terminating", func() (bool, string) {
		if err := e.kube.Get(e.ctx(), key, pc); err != nil {
			return false, err.Error()
		}
		return pc.GetDeletionTimestamp() != nil, "not terminating"
	})
	time.Sleep(2 * time.Second) // give a wrong implementation the chance to let it go
	if err := e.kube.Get(e.ctx(), key, pc); err != nil {
		t.Fatalf("a ProviderConfig in use was deleted: %v", err)
	}
	if err := e.kube.Delete(e.ctx(), w); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the Widget to go", func() (bool, string) {
		err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "user"}, &nsv1beta1.Widget{})
		return kerrors.IsNotFound(err), fmt.Sprint(err)
	})
	// envtest runs no garbage collector; in a cluster it deletes the usage,
	// which the deleted Widget owns. Do its job.
	usages := &nsv1alpha1.ProviderConfigUsageList{}
	if err := e.kube.List(e.ctx(), usages, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range usages.Items {
		u := &usages.Items[i]
		if len(u.OwnerReferences) == 0 || u.OwnerReferences[0].Name != "user" {
			t.Errorf("usage %s is not owned by the Widget: %v", u.Name, u.OwnerReferences)
		}
		if err := e.kube.Delete(e.ctx(), u); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(60*time.Second, "the ProviderConfig to go once unused", func() (bool, string) {
		err := e.kube.Get(e.ctx(), key, &nsv1alpha1.ProviderConfig{})
		return kerrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestResizingIsVisible: a spec size change shows Ready=False (Resizing) on
// the resource while the API resizes, then Ready again.
func TestResizingIsVisible(t *testing.T) {
	e := newEnv(t, apitest.WithOptions(func(o *server.Options) { o.ResizeDelay = 3 * time.Second }))
	e.providerConfig()
	startProvider(t)
	e.widget("grow")
	e.waitReady("grow")
	w := &nsv1beta1.Widget{}
	if err := e.update(w, "grow", func() { w.Spec.ForProvider.Size = ptr.To("large") }); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "Ready=False (Resizing) on the resource", func() (bool, string) {
		cur := e.getWidget("grow")
		c := cur.GetCondition(xpv2.TypeReady)
		return c.Reason == "Resizing" && c.Status == corev1.ConditionFalse, condition(cur, xpv2.TypeReady) + " " + condition(cur, xpv2.TypeSynced)
	})
	got := e.waitReady("grow")
	if got.Status.AtProvider.Size != "large" {
		t.Errorf("observed size %q after the resize, want large", got.Status.AtProvider.Size)
	}
}
