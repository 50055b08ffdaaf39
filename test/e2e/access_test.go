//go:build linux

package e2e_test

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	v1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	mv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// teamNamespace is the namespace examples/rbac/team-a.yaml grants, and
// teamGroup the group it binds.
const (
	teamNamespace = "team-a"
	teamGroup     = "team-a"
)

// TestAppTeamAccess acts as an app team's user, alice, whose only
// permissions come from the RoleBindings of examples/rbac/team-a.yaml
// (kube-apiserver impersonation: user alice in group team-a). She can
// create and read claims and XWidgets in team-a and read their connection
// Secrets; she cannot create managed resources, read another namespace or
// touch ProviderConfigs.
func TestAppTeamAccess(t *testing.T) {
	s := newScenario(t, true)
	if err := platform.EnsureNamespace(s.ctx, suite.c.Client(), teamNamespace); err != nil {
		t.Fatal(err)
	}
	objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "rbac", "team-a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.Create(s.ctx, suite.c.Client(), objs...); err != nil {
		t.Fatal(err)
	}

	cfg := suite.c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{teamGroup}}
	alice, err := client.New(cfg, client.Options{Scheme: suite.kube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// Allowed: her team's XWidgets and claims, their status, their Secrets.
	team := &scenario{t: t, ctx: s.ctx, ns: teamNamespace}
	xr := team.xwidget("alice-web", map[string]any{"keys": int64(1)})
	xr.SetNamespace(teamNamespace)
	claim := team.claim("alice-web", map[string]any{"keys": int64(1)})
	claim.SetNamespace(teamNamespace)
	for _, o := range []*unstructured.Unstructured{xr, claim} {
		// RBAC takes a moment to see new bindings and the XRDs' roles.
		s.eventually("alice creates "+o.GetKind()+" "+o.GetName(), func() error {
			err := alice.Create(s.ctx, o.DeepCopy())
			if kerrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	for _, o := range []*unstructured.Unstructured{xr, claim} {
		s.eventually(o.GetKind()+" "+o.GetName()+" Ready, as alice reads it", func() error {
			if err := alice.Get(s.ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			return isReady(o)
		})
	}
	for _, name := range []string{status(xr, "connectionSecretName"), "alice-web-connection"} {
		sec := &corev1.Secret{}
		s.eventually("alice reads connection Secret "+name, func() error {
			if err := alice.Get(s.ctx, types.NamespacedName{Namespace: teamNamespace, Name: name}, sec); err != nil {
				return err
			}
			if len(sec.Data["key-0"]) == 0 {
				return errors.Errorf("Secret %s has no key-0 yet", name)
			}
			return nil
		})
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(claimAPIVersion)
	list.SetKind("WidgetClaimList")
	if err := alice.List(s.ctx, list, client.InNamespace(teamNamespace)); err != nil {
		t.Errorf("alice cannot list her team's claims: %v", err)
	}

	// Forbidden: everything else.
	otherXR := s.xwidget("not-alices", map[string]any{"keys": int64(0)})
	mr := &mv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: "alice-raw"}}
	mr.Spec.ForProvider.Size = ptr.To("small")
	clusterMR := &v1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "alice-raw"}}
	clusterMR.Spec.ForProvider.Size = ptr.To("small")
	legacyXR := &unstructured.Unstructured{}
	legacyXR.SetAPIVersion(claimAPIVersion)
	legacyXR.SetKind(legacyXRKind)
	legacyXR.SetName("alice-cluster-xr")
	xrList := &unstructured.UnstructuredList{}
	xrList.SetAPIVersion(xwidgetAPIVersion)
	xrList.SetKind("XWidgetList")
	pcList := &unstructured.UnstructuredList{}
	pcList.SetAPIVersion("widget.m.widgetco.io/v1alpha1")
	pcList.SetKind("ProviderConfigList")
	cpc := &unstructured.Unstructured{}
	cpc.SetAPIVersion("widget.m.widgetco.io/v1alpha1")
	cpc.SetKind("ClusterProviderConfig")
	cpc.SetName("default")
	mrList := &mv1beta1.WidgetList{}
	// A namespace policy of her own (docs/policy.md): EnvironmentConfigs
	// and Namespaces are cluster-scoped, out of her RoleBindings' reach.
	policy := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"widgetPolicy": map[string]any{
		"namespaceSelector": map[string]any{},
		"quotas":            map[string]any{"widgets": int64(1000)},
	}}}}
	policy.SetAPIVersion("apiextensions.crossplane.io/v1beta1")
	policy.SetKind("EnvironmentConfig")
	policy.SetName("alice-policy")
	policy.SetLabels(map[string]string{"fn.widgetco.io/widget-policy": "true"})
	teamNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNamespace}}
	for what, call := range map[string]func() error{
		"create a namespaced Widget (a managed resource) in team-a": func() error { return alice.Create(s.ctx, mr) },
		"create a cluster-scoped Widget":                            func() error { return alice.Create(s.ctx, clusterMR) },
		"list the managed resources composed in team-a":             func() error { return alice.List(s.ctx, mrList, client.InNamespace(teamNamespace)) },
		"create a cluster-scoped legacy XWidget":                    func() error { return alice.Create(s.ctx, legacyXR) },
		"create an XWidget in another namespace":                    func() error { return alice.Create(s.ctx, otherXR) },
		"list XWidgets in another namespace":                        func() error { return alice.List(s.ctx, xrList, client.InNamespace(s.ns)) },
		"list Secrets in another namespace":                         func() error { return alice.List(s.ctx, &corev1.SecretList{}, client.InNamespace(s.ns)) },
		"list ProviderConfigs in team-a":                            func() error { return alice.List(s.ctx, pcList, client.InNamespace(teamNamespace)) },
		"read the ClusterProviderConfig":                            func() error { return alice.Get(s.ctx, client.ObjectKeyFromObject(cpc), cpc) },
		"change the ClusterProviderConfig": func() error {
			return alice.Patch(s.ctx, cpc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"endpoint":"http://127.0.0.1:1"}}`)))
		},
		"create a namespace policy (an EnvironmentConfig)": func() error { return alice.Create(s.ctx, policy) },
		"list the namespace policies": func() error {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("apiextensions.crossplane.io/v1beta1")
			l.SetKind("EnvironmentConfigList")
			return alice.List(s.ctx, l)
		},
		"relabel her namespace (which policies select)": func() error {
			return alice.Patch(s.ctx, teamNS, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"widgetco.io/team":"team-b"}}}`)))
		},
		"delete her team's connection Secret": func() error {
			return alice.Delete(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: "alice-web-connection"}})
		},
	} {
		if err := call(); !kerrors.IsForbidden(err) {
			t.Errorf("alice could %s: want Forbidden, got %v", what, err)
		}
	}

	// Clean up as the platform: alice's objects are in team-a, not in the
	// scenario's namespace.
	for _, o := range []*unstructured.Unstructured{xr, claim} {
		if err := suite.kube.Delete(s.ctx, o); err != nil && !kerrors.IsNotFound(err) {
			t.Errorf("cannot delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
