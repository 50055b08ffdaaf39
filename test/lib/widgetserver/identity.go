package widgetserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// ClusterIdentity makes the Widget API trust kube-apiserver as an
// identity token issuer, as a platform sets up workload identity for the
// provider: kube-apiserver serves its OIDC discovery and JWKS on its
// loopback address, anonymous clients may read them (the stock ClusterRole
// system:service-account-issuer-discovery bound to system:unauthenticated,
// as Kubernetes documents for relying parties outside the cluster), and the
// Widget API fetches its keys from there, trusting its serving CA.
type ClusterIdentity struct {
	// Audience the tokens must carry, e.g. "widget-api".
	Audience string
	// Subjects map ServiceAccounts to projects and roles.
	Subjects []idtoken.Subject
}

// discoveryBindingName is the ClusterRoleBinding that lets the Widget API
// read kube-apiserver's discovery anonymously.
const discoveryBindingName = "service-account-issuer-discovery-unauthenticated"

// TrustCluster returns the Widget API's identity token configuration for
// ci on the cluster that kc and cfg (an admin's) reach: kube-apiserver's
// issuer, its keys by discovery, trusting its serving CA (written to
// caFile). It lets anonymous clients read the discovery document and keys,
// as Kubernetes documents for relying parties outside the cluster.
func TrustCluster(ctx context.Context, kc client.Client, cfg *rest.Config, caFile string, ci ClusterIdentity) (*idtoken.Config, error) {
	issuer, err := clusterIssuer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(caFile, cfg.CAData, 0o600); err != nil {
		return nil, errors.Wrap(err, "cannot write kube-apiserver's CA for the Widget API")
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: discoveryBindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}},
	}
	if err := kc.Create(ctx, crb); err != nil && !kerrors.IsAlreadyExists(err) {
		return nil, errors.Wrap(err, "cannot allow anonymous access to kube-apiserver's issuer discovery")
	}
	keys := idtoken.Keys{Discovery: true, CAFile: caFile}
	if host := strings.TrimSuffix(cfg.Host, "/"); host != issuer {
		// The issuer is a name only the cluster resolves (a kind
		// cluster's is kubernetes.default.svc): its discovery document
		// is fetched where this machine reaches kube-apiserver.
		keys.DiscoveryURL = host
	}
	ic := &idtoken.Config{Issuers: []idtoken.Issuer{{
		Issuer:   issuer,
		Audience: ci.Audience,
		Keys:     keys,
		Subjects: ci.Subjects,
	}}}
	if err := ic.Validate(); err != nil {
		return nil, errors.Wrap(err, "invalid identity token configuration for the Widget API")
	}
	return ic, nil
}

// clusterIssuer reads the issuer from kube-apiserver's OIDC discovery
// document.
func clusterIssuer(ctx context.Context, cfg *rest.Config) (string, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", errors.Wrap(err, "cannot create an HTTP client for kube-apiserver")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return "", errors.Wrap(err, "cannot read kube-apiserver's issuer discovery")
	}
	rsp, err := hc.Do(req)
	if err != nil {
		return "", errors.Wrap(err, "cannot read kube-apiserver's issuer discovery")
	}
	defer rsp.Body.Close() //nolint:errcheck // read-only
	if rsp.StatusCode != http.StatusOK {
		return "", errors.Errorf("cannot read kube-apiserver's issuer discovery: HTTP %d", rsp.StatusCode)
	}
	var d struct {
		Issuer string `json:"issuer"`
	}
	if err := json.NewDecoder(io.LimitReader(rsp.Body, idtoken.MaxDiscoveryBytes)).Decode(&d); err != nil || d.Issuer == "" {
		return "", errors.New("cannot read kube-apiserver's issuer discovery: no issuer")
	}
	return d.Issuer, nil
}
