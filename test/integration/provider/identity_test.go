package provider_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// identityNS holds the ServiceAccounts whose tokens the provider sends.
const identityNS = "it-identity"

// TestIdentityTokenFile: the provider authenticates to the Widget API with
// a kube-apiserver ServiceAccount token, read from a file laid out as a
// projected volume holds it, through a ClusterProviderConfig; the Widget
// API verifies it with the apiserver's keys (a JWKS file) and acts in the
// project the subject maps to. When the file is rotated to a token whose
// subject the Widget API maps to nothing, the provider uses it within
// TokenTTL and the Widget says why it cannot sync.
func TestIdentityTokenFile(t *testing.T) {
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	issuer, jwks := apiserverKeys(t, cfg)
	dir := t.TempDir()
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, apitest.WithOptions(func(o *server.Options) {
		o.IdentityTokens = &idtoken.Config{Issuers: []idtoken.Issuer{{
			Issuer:   issuer,
			Audience: "widget-api",
			Keys:     idtoken.Keys{JWKSFile: jwksFile},
			Subjects: []idtoken.Subject{{Subject: "system:serviceaccount:" + identityNS + ":provider-widget", Project: apitest.ProjectA, Role: idtoken.RoleEditor}},
		}}}
		if err := o.IdentityTokens.Validate(); err != nil {
			t.Fatal(err)
		}
	}))
	if err := e.kube.Create(e.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: identityNS}}); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		if err := e.kube.Create(e.ctx(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: identityNS, Name: sa}}); err != nil && !kerrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"widget-api"}, ExpirationSeconds: ptr.To[int64](600)}}
		if err := e.kube.SubResource("token").Create(e.ctx(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: identityNS, Name: sa}}, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	tokenDir := filepath.Join(dir, "secrets")
	volume := filepath.Join(tokenDir, "serviceaccount")
	project(t, volume, "v1", token("provider-widget"))
	startProvider(t, "--token-file-dir", tokenDir)
	e.create(&nsv1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: e.ns},
		Spec: commonv1alpha1.ProviderConfigSpec{
			APIConnection: commonv1alpha1.APIConnection{Endpoint: e.api.URL},
			Credentials: commonv1alpha1.ProviderCredentials{
				Source: xpv2.CredentialsSourceFilesystem,
				Fs:     &commonv1alpha1.TokenFileSelector{Path: filepath.Join(volume, "token")},
			},
		},
	})
	e.widget("web", func(w *nsv1beta1.Widget) {
		w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: e.ns}
	})
	e.waitReady("web")
	if _, err := e.client().GetWidget(e.ctx(), defaultName(e.ns, "web")); err != nil {
		t.Fatalf("the widget is not in project-a, where the provider's ServiceAccount maps: %v", err)
	}

	// The kubelet rotates the volume to a token of a ServiceAccount the
	// Widget API does not map; after TokenTTL the next reconcile sends it.
	project(t, volume, "v2", token("unmapped"))
	time.Sleep(11 * time.Second)
	w := e.getWidget("web")
	if err := e.update(w, "web", func() { w.Spec.ForProvider.Size = ptr.To("large") }); err != nil {
		t.Fatal(err)
	}
	w = e.waitSyncedFalse("web", "403")
	t.Logf("after rotation to an unmapped subject: %s", condition(w, xpv2.TypeSynced))
}

// project lays out dir as the kubelet lays out a projected volume (token ->
// ..data/token, ..data -> ..<version>) and swaps ..data atomically.
func project(t *testing.T, dir, version, token string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".."+version), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".."+version, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(".."+version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "token")); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(dir, "token")); err != nil {
			t.Fatal(err)
		}
	}
}

// apiserverKeys returns kube-apiserver's issuer, from its discovery
// document, and its JWKS, both read as an admin.
func apiserverKeys(t *testing.T, cfg *rest.Config) (string, []byte) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) []byte {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		rsp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer rsp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(rsp.Body, 1<<20))
		if err != nil || rsp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, rsp.StatusCode, err)
		}
		return b
	}
	var disco struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(get("/.well-known/openid-configuration"), &disco); err != nil {
		t.Fatal(err)
	}
	return disco.Issuer, get("/openid/v1/jwks")
}
