// Package identity_test runs the Widget API with a real kube-apiserver as
// its identity token issuer: ServiceAccount tokens from the TokenRequest
// API, keys from the apiserver's OIDC discovery or from a JWKS file.
package identity_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

const audience = "widget-api"

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestServiceAccountTokens: ServiceAccount tokens that kube-apiserver
// issues for the Widget API's audience act in the project their subject
// maps to, with keys from the apiserver's own discovery (which needs
// anonymous access to /.well-known/openid-configuration and
// /openid/v1/jwks) or from a JWKS file copied out of the cluster.
func TestServiceAccountTokens(t *testing.T) {
	e, err := kube.Start(kube.Options{LoopbackJWKSURI: true})
	if errors.Is(err, kube.ErrNoAssets) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })

	disco := discovery(t, e.Config)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "apiserver-ca.crt")
	if err := os.WriteFile(caFile, e.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, get(t, e.Config, "/openid/v1/jwks"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		create(t, e.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		create(t, e.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-widget"}})
	}
	teamA := token(t, e.Client, "team-a", audience)
	teamB := token(t, e.Client, "team-b", audience)
	kubeAud := token(t, e.Client, "team-a", "")

	newEnv := func(t *testing.T, keys idtoken.Keys) *apitest.Env {
		t.Helper()
		cfg := &idtoken.Config{Issuers: []idtoken.Issuer{{
			Issuer:   disco.Issuer,
			Audience: audience,
			Keys:     keys,
			Subjects: []idtoken.Subject{{Subject: "system:serviceaccount:team-a:provider-widget", Project: apitest.ProjectA, Role: idtoken.RoleEditor}},
		}}}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
			o.IdentityTokens = cfg
			o.Logger = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}))
	}

	// The stock ClusterRoleBinding gives discovery to ServiceAccounts only:
	// the Widget API, fetching anonymously, is refused until a platform
	// allows it.
	t.Run("DiscoveryWithoutAnonymousAccess", func(t *testing.T) {
		env := newEnv(t, idtoken.Keys{Discovery: true, CAFile: caFile})
		if _, err := env.Client(t, teamA).ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{}); !widgetapi.IsUnauthorized(err) {
			t.Errorf("want 401 (keys unavailable), got %v", err)
		}
	})
	allowAnonymousDiscovery(t, e.Client)

	for name, keys := range map[string]idtoken.Keys{
		"Discovery": {Discovery: true, CAFile: caFile},
		"JWKSFile":  {JWKSFile: jwksFile},
	} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t, keys)

			if _, err := env.Client(t, teamA).CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "by-" + strings.ToLower(name)}); err != nil {
				t.Fatalf("team-a's ServiceAccount token: %v", err)
			}
			if _, err := env.Client(t, apitest.TokenA).GetWidget(ctx(t), "by-"+strings.ToLower(name)); err != nil {
				t.Errorf("static token A does not see the widget team-a's ServiceAccount created in project-a: %v", err)
			}
			if _, err := env.Client(t, teamB).ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{}); !widgetapi.IsForbidden(err) {
				t.Errorf("team-b's ServiceAccount, mapped to nothing: want 403, got %v", err)
			}
			if _, err := env.Client(t, kubeAud).ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{}); !widgetapi.IsUnauthorized(err) {
				t.Errorf("a token for kube-apiserver's own audience: want 401, got %v", err)
			}
		})
	}
}

// logWriter writes the Widget API's warnings (failed key fetches) to the
// test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type discoveryDoc struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// discovery reads kube-apiserver's OIDC discovery document as an admin:
// envtest sets --service-account-issuer to the apiserver's own URL.
func discovery(t *testing.T, cfg *rest.Config) discoveryDoc {
	t.Helper()
	var d discoveryDoc
	if err := json.Unmarshal(get(t, cfg, "/.well-known/openid-configuration"), &d); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver's issuer %q, jwks_uri %q", d.Issuer, d.JWKSURI)
	return d
}

func get(t *testing.T, cfg *rest.Config, path string) []byte {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	var b json.RawMessage
	if err := json.NewDecoder(rsp.Body).Decode(&b); err != nil || rsp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, rsp.StatusCode, err)
	}
	return b
}

// allowAnonymousDiscovery binds the stock ClusterRole
// system:service-account-issuer-discovery to system:unauthenticated, as
// Kubernetes documents for relying parties outside the cluster.
func allowAnonymousDiscovery(t *testing.T, c client.Client) {
	t.Helper()
	create(t, c, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "service-account-issuer-discovery-unauthenticated"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}},
	})
}

func create(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(ctx(t), o); err != nil {
		t.Fatal(err)
	}
}

// token asks the TokenRequest API for a token of ns's provider-widget
// ServiceAccount; an empty aud means kube-apiserver's own audience.
func token(t *testing.T, c client.Client, ns, aud string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-widget"}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if aud != "" {
		tr.Spec.Audiences = []string{aud}
	}
	if err := c.SubResource("token").Create(ctx(t), sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
