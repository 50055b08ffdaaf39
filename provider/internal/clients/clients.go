// Package clients resolves a managed resource's ProviderConfig into a
// connection to the Widget API: endpoint, bearer token from a Secret,
// optional private CA. It is read on every reconcile, so changes to a
// ProviderConfig or its Secret take effect without a restart.
package clients

import (
	"context"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/ttlmap"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// A Connection is a ready-to-use Widget API client and the identity of the
// account it acts as.
type Connection struct {
	// Client calls the Widget API with the ProviderConfig's credentials.
	Client *widgetapi.Client
	// Key identifies the endpoint, token and CA bundle, each compared in
	// full (see connectionKey): connections with equal keys see the same
	// widgets; rate limits, change feeds and the memory of recent widgets
	// are kept per key. It is opaque and reveals nothing about the token.
	Key string
	// Endpoint is the Widget API URL.
	Endpoint string
	// Namespace is the namespace of the ProviderConfig the connection
	// comes from: the tenant that controls its endpoint, token and CA
	// bundle. It is empty for a ClusterProviderConfig or a cluster-scoped
	// ProviderConfig, which only a platform team can write. Per-tenant
	// shares (of change feeds, of the reconciles they trigger) are kept
	// by it.
	Namespace string

	// pauses and credential (endpoint, the token itself and CA bundle,
	// even for a token file; and the owner, Namespace) say when the
	// credential is paused.
	pauses     *Pauses
	credential Credential
}

// Paused returns, while the Widget API's refusal of the connection's
// credential pauses it, or its owner's budget of refused credentials holds
// it back (see Pauses), how long that lasts at least and the error that
// explains it.
func (c *Connection) Paused() (time.Duration, error) { return c.pauses.Paused(c.credential) }

// A Resolver turns managed resources into Connections. It is safe for
// concurrent use.
type Resolver struct {
	kube     client.Client
	modern   resource.ModernTracker
	legacy   resource.LegacyTracker
	ua       string
	observe  widgetapi.ObserveFunc
	retry    widgetapi.RetryPolicy
	throttle *Throttle
	pauses   *Pauses

	httpClients *httpClients
	// tokens are the tokens read in the last TokenTTL, by Secret key.
	tokens *ttlmap.Map[tokenRef, string]
	// files reads tokens from files (source Filesystem).
	files *tokenFiles
}

// MaxConnsPerEndpoint bounds the connections, and so the requests in
// flight, to one Widget API host.
const MaxConnsPerEndpoint = 32

// TokenTTL is how long a token read from its Secret is used without reading
// the Secret again. The provider does not cache Secrets (a cluster holds
// many that are not its own), so without it every reconcile would read one;
// a rotated token is in use within TokenTTL.
const TokenTTL = 10 * time.Second

type tokenRef struct{ namespace, name, key string }

// An Option configures a Resolver.
type Option func(*Resolver)

// WithUserAgent sets the User-Agent of Widget API requests.
func WithUserAgent(ua string) Option { return func(r *Resolver) { r.ua = ua } }

// WithObserver reports every Widget API call (for metrics).
func WithObserver(fn widgetapi.ObserveFunc) Option { return func(r *Resolver) { r.observe = fn } }

// WithThrottle tells t about every successful call, so its client-side
// rate limit can recover after 429s.
func WithThrottle(t *Throttle) Option { return func(r *Resolver) { r.throttle = t } }

// WithPauses makes every connection's client stop sending a credential the
// Widget API refused, as p says (see Pauses).
func WithPauses(p *Pauses) Option { return func(r *Resolver) { r.pauses = p } }

// WithTokenFileDir sets the only directory token files (credentials source
// Filesystem) are read from; default DefaultTokenFileDir.
func WithTokenFileDir(dir string) Option {
	return func(r *Resolver) { r.files = newTokenFiles(dir) }
}

// WithRetryPolicy sets the client's retry policy for idempotent calls.
func WithRetryPolicy(p widgetapi.RetryPolicy) Option { return func(r *Resolver) { r.retry = p } }

// NewResolver returns a Resolver that reads ProviderConfigs and Secrets with
// kube and records ProviderConfigUsages, so a ProviderConfig in use cannot be
// deleted.
func NewResolver(kube client.Client, opts ...Option) *Resolver {
	r := &Resolver{
		kube:        kube,
		modern:      resource.NewProviderConfigUsageTracker(kube, &nsv1alpha1.ProviderConfigUsage{}),
		legacy:      resource.NewLegacyProviderConfigUsageTracker(kube, &clusterv1alpha1.ProviderConfigUsage{}),
		ua:          "provider-widget",
		observe:     func(string, int, time.Duration) {},
		retry:       widgetapi.DefaultRetryPolicy,
		httpClients: newHTTPClients(MaxHTTPClients, HTTPClientIdle),
		tokens:      ttlmap.New[tokenRef, string](TokenTTL),
		files:       newTokenFiles(DefaultTokenFileDir),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Resolve finds mg's ProviderConfig, records that mg uses it, reads the token
// and returns a Connection. Errors say which object is missing or wrong and
// never contain the token.
func (r *Resolver) Resolve(ctx context.Context, mg resource.Managed) (*Connection, error) {
	pc, err := r.providerConfig(ctx, mg)
	if err != nil {
		return nil, err
	}
	spec := pc.GetProviderConfigSpec()
	if _, ok := pc.(*nsv1alpha1.ProviderConfig); ok && spec.Credentials.Source != xpv2.CredentialsSourceSecret {
		// The CRD allows only Secret here; this holds without it too.
		return nil, errors.Errorf("%s: credentials source %q is not supported in a namespaced ProviderConfig: use Secret", describe(pc), spec.Credentials.Source)
	}
	token, credKey, err := r.token(ctx, spec.Credentials)
	if err != nil {
		return nil, err
	}
	hc, err := r.httpClients.get(spec.CABundle)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot use the caBundle of %s", describe(pc))
	}
	key := connectionKey(spec.Endpoint, token, spec.CABundle)
	if credKey != "" {
		// A token file stands for one identity whatever token it holds
		// now: rotation keeps the connection's rate limits, change feed
		// and memory of widgets.
		key = connectionKey(spec.Endpoint, credKey, spec.CABundle, "file")
	}
	observe := func(op string, status int, d time.Duration) {
		r.observe(op, knownStatus(status), d)
		if t := r.throttle; t != nil && status >= 200 && status < 300 {
			t.Succeeded(key)
		}
	}
	// The pause is per token even for a token file: a rotated token is
	// tried at once. Its budget is the owner's: whoever controls the
	// ProviderConfig can make credentials at will.
	credential := Credential{Key: credentialKey(spec.Endpoint, token, spec.CABundle), Endpoint: spec.Endpoint}
	if _, ok := pc.(*nsv1alpha1.ProviderConfig); ok {
		credential.Owner = pc.GetNamespace()
	}
	opts := []widgetapi.Option{
		widgetapi.WithToken(token),
		widgetapi.WithHTTPClient(hc),
		widgetapi.WithUserAgent(r.ua),
		widgetapi.WithObserver(observe),
		widgetapi.WithRetryPolicy(r.retry),
	}
	if r.pauses != nil {
		opts = append(opts, widgetapi.WithGuard(newGuard(r.pauses, credential)))
	}
	c, err := widgetapi.New(spec.Endpoint, opts...)
	if err != nil {
		return nil, errors.Wrapf(err, "invalid endpoint in %s", describe(pc))
	}
	return &Connection{Client: c, Key: key, Endpoint: spec.Endpoint, Namespace: credential.Owner, pauses: r.pauses, credential: credential}, nil
}

// providerConfig tracks usage and returns mg's ProviderConfig, whatever its
// scope and kind.
func (r *Resolver) providerConfig(ctx context.Context, mg resource.Managed) (commonv1alpha1.ProviderConfigResource, error) {
	switch m := mg.(type) {
	case resource.ModernManaged:
		ref := m.GetProviderConfigReference()
		if ref == nil || ref.Name == "" {
			return nil, errors.New("spec.providerConfigRef is not set: name a ProviderConfig in this namespace or a ClusterProviderConfig")
		}
		var pc commonv1alpha1.ProviderConfigResource
		var key types.NamespacedName
		switch ref.Kind {
		case nsv1alpha1.ProviderConfigKind:
			pc, key = &nsv1alpha1.ProviderConfig{}, types.NamespacedName{Namespace: m.GetNamespace(), Name: ref.Name}
		case nsv1alpha1.ClusterProviderConfigKind:
			pc, key = &nsv1alpha1.ClusterProviderConfig{}, types.NamespacedName{Name: ref.Name}
		default:
			return nil, errors.Errorf("spec.providerConfigRef.kind %q is not supported: use ProviderConfig or ClusterProviderConfig", ref.Kind)
		}
		if err := r.kube.Get(ctx, key, pc); err != nil {
			return nil, getError(err, describeRef(ref.Kind, key))
		}
		if err := r.modern.Track(ctx, m); err != nil {
			return nil, errors.Wrap(err, "cannot track ProviderConfig usage")
		}
		return pc, nil
	case resource.LegacyManaged: //nolint:staticcheck // cluster-scoped MRs exist for legacy claims on purpose
		ref := m.GetProviderConfigReference()
		if ref == nil || ref.Name == "" {
			return nil, errors.New("spec.providerConfigRef is not set: name a ProviderConfig (widget.widgetco.io)")
		}
		pc := &clusterv1alpha1.ProviderConfig{}
		key := types.NamespacedName{Name: ref.Name}
		if err := r.kube.Get(ctx, key, pc); err != nil {
			return nil, getError(err, describeRef("ProviderConfig", key))
		}
		if err := r.legacy.Track(ctx, m); err != nil {
			return nil, errors.Wrap(err, "cannot track ProviderConfig usage")
		}
		return pc, nil
	default:
		return nil, errors.Errorf("%T is not a managed resource this provider understands", mg)
	}
}

func getError(err error, what string) error {
	if kerrors.IsNotFound(err) {
		return errors.Errorf("%s not found: create it or fix spec.providerConfigRef", what)
	}
	return errors.Wrapf(err, "cannot get %s", what)
}

func describeRef(kind string, key types.NamespacedName) string {
	if kind == "" {
		kind = "ProviderConfig"
	}
	if key.Namespace != "" {
		return kind + " " + key.Namespace + "/" + key.Name
	}
	return kind + " " + key.Name
}

func describe(pc commonv1alpha1.ProviderConfigResource) string {
	kind := "ProviderConfig"
	if _, ok := pc.(*nsv1alpha1.ClusterProviderConfig); ok {
		kind = "ClusterProviderConfig"
	}
	return describeRef(kind, types.NamespacedName{Namespace: pc.GetNamespace(), Name: pc.GetName()})
}

// token returns the bearer token of cr and, for a token file, its path
// (which identifies the connection in place of the token). See secretToken
// and tokenFiles.get.
func (r *Resolver) token(ctx context.Context, cr commonv1alpha1.ProviderCredentials) (token, file string, err error) {
	switch cr.Source {
	case xpv2.CredentialsSourceSecret:
		token, err = r.secretToken(ctx, cr)
		return token, "", err
	case xpv2.CredentialsSourceFilesystem:
		if cr.Fs == nil || cr.Fs.Path == "" {
			return "", "", errors.New("spec.credentials.fs.path must name the file holding the Widget API token")
		}
		token, err = r.files.get(cr.Fs.Path)
		return token, cr.Fs.Path, err
	default:
		return "", "", errors.Errorf("credentials source %q is not supported: use Secret or Filesystem", cr.Source)
	}
}

// secretToken reads the bearer token from the referenced Secret key, or returns
// the one read from it less than TokenTTL ago. A token longer than
// MaxTokenBytes is refused; errors name the Secret and key, never the value.
func (r *Resolver) secretToken(ctx context.Context, cr commonv1alpha1.ProviderCredentials) (string, error) {
	ref := cr.SecretRef
	if ref == nil || ref.Name == "" || ref.Key == "" {
		return "", errors.New("spec.credentials.secretRef must name a Secret and a key holding the Widget API token")
	}
	tr := tokenRef{namespace: ref.Namespace, name: ref.Name, key: ref.Key}
	if tok, ok := r.tokens.Get(tr); ok {
		return tok, nil
	}
	s := &corev1.Secret{}
	if err := r.kube.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		r.forget(tr)
		if kerrors.IsNotFound(err) {
			return "", errors.Errorf("token Secret %s/%s not found: create it with the Widget API token under key %q", ref.Namespace, ref.Name, ref.Key)
		}
		return "", errors.Wrapf(err, "cannot get token Secret %s/%s", ref.Namespace, ref.Name)
	}
	raw := s.Data[ref.Key]
	if len(raw) > MaxTokenBytes {
		r.forget(tr)
		return "", errors.Errorf("token Secret %s/%s key %q holds %d bytes: a Widget API token is at most %d bytes", ref.Namespace, ref.Name, ref.Key, len(raw), MaxTokenBytes)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		r.forget(tr)
		return "", errors.Errorf("token Secret %s/%s has no (or an empty) key %q", ref.Namespace, ref.Name, ref.Key)
	}
	r.tokens.Put(tr, tok)
	return tok, nil
}

// forget drops a token that could not be read again.
func (r *Resolver) forget(tr tokenRef) { r.tokens.Delete(tr) }
