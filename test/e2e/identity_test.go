//go:build linux

package e2e_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	dto "github.com/prometheus/client_model/go"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/leaks"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/widgetserver"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// Workload identity: the Widget API trusts kube-apiserver's issuer and maps
// ServiceAccounts to projects. No static token of the suite acts in either
// project, so whatever is there was made with an identity token.
const (
	identityAudience = "widget-api"
	// identityProject is the provider's own identity's project: every
	// ServiceAccount of Crossplane's namespace acts in it.
	identityProject = "e2e-identity"
	// teamIdentityProject is the project of TestWorkloadIdentity's team
	// namespace's ServiceAccounts; its neighbour team-b's map to nothing.
	teamIdentityProject = "e2e-team-identity"
	// kubeletRestarts is how often TestWorkloadIdentity makes kubelet
	// project new tokens. kubelet rotates a token at 80 % of its lifetime
	// (ten minutes at least); a kubelet that starts again has none cached
	// and projects new ones at once, through the same path.
	kubeletRestarts = 2
	// identityConfig is the ClusterProviderConfig of
	// examples/provider/clusterproviderconfig-token-file.yaml.
	identityConfig = "identity"
)

// clusterIdentity is what the suite's Widget API trusts.
func clusterIdentity() *widgetserver.ClusterIdentity {
	return &widgetserver.ClusterIdentity{
		Audience: identityAudience,
		Subjects: []idtoken.Subject{
			{Subject: "system:serviceaccount:" + cluster.CrossplaneNamespace + ":*", Project: identityProject, Role: idtoken.RoleEditor},
			{Subject: "system:serviceaccount:" + namespaceFor("TestWorkloadIdentity") + ":*", Project: teamIdentityProject, Role: idtoken.RoleEditor},
		},
	}
}

// teamTokens are the ServiceAccount tokens scenarios put into Secrets, for
// the canary check: they may sit in their Secret and nowhere else.
var teamTokens struct {
	mu     sync.Mutex
	tokens []string
}

// TestWorkloadIdentity runs a Widget on the provider's own identity - the
// projected ServiceAccount token of examples/runtime, read through the
// ClusterProviderConfig of examples/provider/clusterproviderconfig-token-file.yaml,
// with no token Secret - across several token rotations, and then tries the
// ways a team could borrow an identity that is not its own. It restarts
// kubelet, so it runs alone.
func TestWorkloadIdentity(t *testing.T) {
	s := newScenario(t, false)
	for _, project := range apiTokens {
		if project == identityProject || project == teamIdentityProject {
			t.Fatalf("a static token of the suite acts in project %s: the test could not tell identity from it", project)
		}
	}
	cpc := s.identityConfig()
	if cpc.Spec.Credentials.SecretRef != nil || cpc.Spec.Credentials.Source != xpv2.CredentialsSourceFilesystem {
		t.Fatalf("ClusterProviderConfig %s: source %s with a Secret %v, want Filesystem and no Secret", identityConfig, cpc.Spec.Credentials.Source, cpc.Spec.Credentials.SecretRef)
	}

	mr := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "by-identity"},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: identityConfig}},
			ForProvider:         widgetParams("rotation 0"),
		},
	}
	s.create(mr)
	s.eventually("Widget on the provider's identity Ready", func() error { return s.ready(mr) })
	name := meta.GetExternalName(mr)
	reader := s.projectReader()
	if _, err := reader.GetWidget(s.ctx, name); err != nil {
		t.Fatalf("widget %s is not in project %s, which only the provider's identity acts in: %v", name, identityProject, err)
	}
	if _, err := suite.api.GetWidget(s.ctx, name); !widgetapi.IsNotFound(err) {
		t.Errorf("widget %s in the static token's project: want 404, got %v", name, err)
	}

	s.rotate(mr, reader, name)
	s.borrowIdentity()
}

// widgetParams is a small widget with a description.
func widgetParams(desc string) commonv1beta1.WidgetParameters {
	return commonv1beta1.WidgetParameters{Size: ptr.To("small"), Description: ptr.To(desc)}
}

// identityConfig creates the example ClusterProviderConfig (and its legacy
// twin) pointed at the suite's Widget API, and returns it.
func (s *scenario) identityConfig() *namespacedv1alpha1.ClusterProviderConfig {
	s.t.Helper()
	objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "provider", "clusterproviderconfig-token-file.yaml"))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, u := range objs {
		s.set(u, suite.widgets.URL, "spec", "endpoint")
		if err := suite.kube.Create(s.ctx, u); err != nil && !kerrors.IsAlreadyExists(err) {
			s.t.Fatalf("cannot create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	cpc := &namespacedv1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: identityConfig}}
	if err := s.get(cpc); err != nil {
		s.t.Fatal(err)
	}
	return cpc
}

// projectReader is a Widget API client for the provider's project, with
// a token of another ServiceAccount of Crossplane's namespace.
func (s *scenario) projectReader() *widgetapi.Client {
	s.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: suite.c.Namespace(), Name: "e2e-identity-auditor"}}
	if err := suite.kube.Create(s.ctx, sa); err != nil && !kerrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	c, err := widgetapi.New(suite.widgets.URL, widgetapi.WithToken(s.serviceAccountToken(sa.Namespace, sa.Name)))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// serviceAccountToken asks the TokenRequest API, as an admin, for a token of
// a ServiceAccount for the Widget API's audience, and records it for the
// canary check.
func (s *scenario) serviceAccountToken(ns, name string) string {
	s.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{identityAudience}, ExpirationSeconds: ptr.To[int64](3600)}}
	if err := suite.kube.SubResource("token").Create(s.ctx, sa, tr); err != nil {
		s.t.Fatalf("cannot request a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	teamTokens.mu.Lock()
	teamTokens.tokens = append(teamTokens.tokens, tr.Status.Token)
	teamTokens.mu.Unlock()
	return tr.Status.Token
}

// rotate changes the widget's description every few seconds while kubelet
// projects new tokens into the provider's pods twice, and fails on any
// Synced=False of the Widget, any change that does not reach the Widget API,
// and any identity token the Widget API refused for another reason than
// an unmapped subject (which borrowIdentity causes on purpose).
func (s *scenario) rotate(mr *namespacedv1beta1.Widget, reader *widgetapi.Client, name string) {
	s.t.Helper()
	if !suite.c.Local() {
		s.t.Logf("Token rotation not exercised: it restarts kubelet and reads the tokens it projects: %v", cluster.ErrNotLocal)
		return
	}
	before := len(suite.c.ProjectedTokens())
	refused0, accepted0 := identityCounts(s.t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	// The key is taken before the watcher starts: mergePatch below decodes
	// into mr while the watcher runs.
	key := client.ObjectKeyFromObject(mr)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			w := &namespacedv1beta1.Widget{}
			if err := suite.kube.Get(s.ctx, key, w); err != nil {
				continue
			}
			if c := w.GetCondition(xpv2.TypeSynced); c.Status == corev1.ConditionFalse {
				mu.Lock()
				failures = append(failures, string(c.Reason)+": "+c.Message)
				mu.Unlock()
			}
		}
	})
	begin := time.Now()
	rounds, restarts := 0, 0
	for rounds = 1; restarts < kubeletRestarts || len(suite.c.ProjectedTokens())-before < 2*kubeletRestarts; rounds++ {
		if rounds > 20 {
			s.t.Fatalf("kubelet projected %d new tokens after %d restarts, want %d: does it still rotate them?", len(suite.c.ProjectedTokens())-before, restarts, 2*kubeletRestarts)
		}
		if rounds%2 == 0 && restarts < kubeletRestarts {
			if err := suite.c.Node.RestartKubelet(); err != nil {
				s.t.Fatal(err)
			}
			restarts++
		}
		desc := fmt.Sprintf("rotation %d", rounds)
		s.mergePatch(mr, `{"spec":{"forProvider":{"description":"`+desc+`"}}}`)
		s.eventually("description "+desc+" in the Widget API", func() error {
			w, err := reader.GetWidget(s.ctx, name)
			if err != nil {
				return err
			}
			if w.Description != desc {
				return errors.Errorf("description %q, want %q", w.Description, desc)
			}
			return nil
		})
		time.Sleep(3 * time.Second)
	}
	close(stop)
	wg.Wait()
	rotated := len(suite.c.ProjectedTokens()) - before
	refused1, accepted1 := identityCounts(s.t)
	s.t.Logf("Workload identity: %d changes applied over %s while kubelet, restarted %d times, projected %d new tokens (both replicas); the Widget API accepted %.0f identity tokens and refused %.0f (other than unmapped)",
		rounds-1, time.Since(begin).Round(time.Second), kubeletRestarts, rotated, accepted1-accepted0, refused1-refused0)
	if len(failures) > 0 {
		s.t.Errorf("the Widget on the provider's identity was Synced=False %d times during token rotation, first: %s", len(failures), failures[0])
	}
	if refused1 != refused0 {
		s.t.Errorf("the Widget API refused %.0f identity tokens during rotation (see widgetapi_identity_tokens_refused_total), want none", refused1-refused0)
	}
	if accepted1 <= accepted0 {
		s.t.Error("the Widget API accepted no identity token during rotation: whom did the provider call as?")
	}
}

// identityCounts returns the Widget API's identity tokens refused (for any
// reason but an unmapped subject) and accepted so far.
func identityCounts(t *testing.T) (refused, accepted float64) {
	t.Helper()
	mfs, err := suite.widgets.Server.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "widgetapi_identity_tokens_refused_total":
				if label(m.GetLabel(), "reason") != string(idtoken.ReasonUnmapped) {
					refused += m.GetCounter().GetValue()
				}
			case "widgetapi_identity_tokens_accepted_total":
				accepted += m.GetCounter().GetValue()
			}
		}
	}
	return refused, accepted
}

// borrowIdentity tries the ways a team could act as an identity that is
// not its own, each refused where the team sees it:
//
//   - a namespaced ProviderConfig with the provider's token file: refused
//     at admission (only Secret is a source there);
//   - a namespaced ProviderConfig with a Secret holding a token of the
//     team's own ServiceAccount: works, in the project the Widget API maps
//     the team's namespace to (what docs/tenancy.md recommends);
//   - the same in team b, whose ServiceAccounts the Widget API maps to no
//     project: the Widget is Synced=False, saying so;
//   - team b asking for a token of team a's ServiceAccount: RBAC forbids it,
//     even with the right to mint its own.
func (s *scenario) borrowIdentity() {
	s.t.Helper()
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1alpha1",
		"kind":       "ProviderConfig",
		"metadata":   map[string]any{"namespace": s.ns, "name": "borrowed"},
		"spec": map[string]any{
			"endpoint":    suite.widgets.URL,
			"credentials": map[string]any{"source": "Filesystem", "fs": map[string]any{"path": "/var/run/secrets/widgetco.io/serviceaccount/token"}},
		},
	}}
	err := suite.kube.Create(s.ctx, pc)
	if !kerrors.IsInvalid(err) || !strings.Contains(err.Error(), `Unsupported value: "Filesystem"`) {
		s.t.Errorf("a namespaced ProviderConfig with the provider's token file: want it refused at admission (Unsupported value \"Filesystem\"), got %v", err)
	}
	s.t.Logf("Attack namespaced ProviderConfig with the provider's identity: %v", err)

	own := s.teamIdentity(s)
	s.eventually("team a's Widget on its own ServiceAccount Ready", func() error { return s.ready(own) })

	b := s.neighbour("team-b")
	other := b.teamIdentity(s)
	s.refused("team b's own ServiceAccount, mapped to no project", other, "403", "not mapped to a project")
	// Stop the provider calling with team b's token for the rest of the
	// suite: the widget never existed, so nothing is left behind.
	if err := suite.kube.Delete(s.ctx, other); err != nil {
		s.t.Fatal(err)
	}
	s.mergePatch(other, `{"metadata":{"finalizers":null}}`)

	// A platform lets team b mint tokens of its own ServiceAccounts; that
	// gives it no token of team a's.
	s.create(
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "mint-tokens"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "mint-tokens"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mint-tokens"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "team-b"}},
		},
	)
	cfg := suite.c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "bob", Groups: []string{"team-b"}}
	bob, err := client.New(cfg, client.Options{Scheme: suite.kube.Scheme()})
	if err != nil {
		s.t.Fatal(err)
	}
	mint := func(ns string) error {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "widgets"}}
		return bob.SubResource("token").Create(s.ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{identityAudience}, ExpirationSeconds: ptr.To[int64](600)}})
	}
	s.eventually("team b mints a token of its own ServiceAccount", func() error { return mint(b.ns) })
	if err := mint(s.ns); !kerrors.IsForbidden(err) {
		s.t.Errorf("team b asks for a token of team a's ServiceAccount: want Forbidden, got %v", err)
	}
}

// teamIdentity gives the team of s (asked for in the test of parent) a
// ServiceAccount "widgets", a Secret with its token for the Widget API, a
// namespaced ProviderConfig on that Secret and a Widget on that config,
// and returns the Widget.
func (s *scenario) teamIdentity(parent *scenario) *namespacedv1beta1.Widget {
	s.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "widgets"}}
	s.create(sa)
	tok := parent.serviceAccountToken(s.ns, sa.Name)
	s.create(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "widgets-identity"}, StringData: map[string]string{"token": tok}},
		&namespacedv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "own-identity"},
			Spec: commonv1alpha1.LocalProviderConfigSpec{
				APIConnection: commonv1alpha1.APIConnection{Endpoint: suite.widgets.URL},
				Credentials: commonv1alpha1.LocalProviderCredentials{
					Source:    xpv2.CredentialsSourceSecret,
					SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "widgets-identity"}, Key: "token"},
				},
			},
		},
	)
	mr := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "own-identity"},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "own-identity"}},
			ForProvider:         widgetParams("a team's own identity"),
		},
	}
	s.create(mr)
	return mr
}

func label(ls []*dto.LabelPair, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// projectedTokenCanaries are the canaries of every projected token the node
// wrote and every token scenarios put into Secrets.
func projectedTokenCanaries() (projected []string, canaries []leaks.Canary) {
	projected = suite.c.ProjectedTokens()
	for _, t := range projected {
		canaries = append(canaries, leaks.Canary{Kind: "projected ServiceAccount token", Value: t})
	}
	teamTokens.mu.Lock()
	defer teamTokens.mu.Unlock()
	for _, t := range teamTokens.tokens {
		canaries = append(canaries, leaks.Canary{Kind: "ServiceAccount token", Value: t})
	}
	return projected, canaries
}
