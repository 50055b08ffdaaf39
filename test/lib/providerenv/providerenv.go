// Package providerenv runs provider-widget as the integration tests and the
// benchmarks run it: envtest (a real kube-apiserver and etcd) with the
// provider's CRDs, and the provider's binary (test/lib/proc.Build) as a
// process against it, with a tenant's token Secret and ProviderConfig.
package providerenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/apis"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
)

// Binary is the import path of provider-widget's main package, for
// proc.Build.
const Binary = "github.com/widgetco/crossplane-widget/provider"

// Options of StartKube.
type Options struct {
	// Root is the repository's root: the CRDs are in package/provider/crds.
	Root string
	// Dir is where the provider's kubeconfig is written.
	Dir string
	// QPS and Burst of Kube.Client; client-go's defaults when zero.
	QPS   float32
	Burst int
}

// Kube is envtest with the provider's CRDs.
type Kube struct {
	// Client is an admin client that also watches.
	Client client.WithWatch
	// Kubeconfig is an admin kubeconfig for the provider.
	Kubeconfig string
	env        *kube.Env
}

// StartKube starts kube-apiserver and etcd with the provider's CRDs. It
// returns kube.ErrNoAssets when KUBEBUILDER_ASSETS is unset.
func StartKube(o Options) (*Kube, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apis.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("cannot build the scheme: %w", err)
		}
	}
	k := &Kube{Kubeconfig: filepath.Join(o.Dir, "kubeconfig")}
	env, err := kube.Start(kube.Options{
		CRDDirs:    []string{filepath.Join(o.Root, "package", "provider", "crds")},
		Kubeconfig: k.Kubeconfig,
		Scheme:     scheme,
		QPS:        o.QPS,
		Burst:      o.Burst,
	})
	if err != nil {
		return nil, err
	}
	k.env = env
	if k.Client, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme}); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("cannot create a Kubernetes client: %w", err)
	}
	return k, nil
}

// Stop stops kube-apiserver and etcd.
func (k *Kube) Stop() error { return k.env.Stop() }

// TokenSecret is the Secret, and its key, that Project's ProviderConfig
// reads the token from.
const (
	TokenSecret = "widget-token"
	TokenKey    = "token"
)

// Project creates, in namespace ns (which must exist), the Secret
// TokenSecret holding token and a ProviderConfig "default" that reaches the
// Widget API at endpoint with it.
func Project(ctx context.Context, c client.Client, ns, endpoint, token string) error {
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TokenSecret}, StringData: map[string]string{TokenKey: token}},
		&nsv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
			Spec: commonv1alpha1.LocalProviderConfigSpec{
				APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
				Credentials: commonv1alpha1.LocalProviderCredentials{
					Source:    xpv2.CredentialsSourceSecret,
					SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: TokenSecret}, Key: TokenKey},
				},
			},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("cannot create %T %s/%s: %w", o, ns, o.GetName(), err)
		}
	}
	return nil
}

// Provider is a provider-widget process.
type Provider struct {
	*proc.Process
	// Metrics is the address of its /metrics.
	Metrics string
}

// StartProvider starts bin against kubeconfig with args after its own
// --kubeconfig, --metrics-bind-address (a free loopback port) and
// --health-probe-bind-address 0, logging to log.
func StartProvider(bin, kubeconfig, log string, args ...string) (*Provider, error) {
	metrics, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	full := append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", metrics, "--health-probe-bind-address", "0"}, args...)
	p := &Provider{Metrics: metrics, Process: proc.New(strings.TrimSuffix(filepath.Base(log), filepath.Ext(log)), proc.Command{Path: bin, Args: full},
		os.Environ(), log, slog.New(slog.DiscardHandler))}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("cannot start provider-widget: %w", err)
	}
	return p, nil
}

// Metric returns the sum of the samples of a metric of the provider whose
// labels include every given pair, or -1 when its metrics cannot be read.
func (p *Provider) Metric(ctx context.Context, name string, labels map[string]string) float64 {
	ss, err := prom.Scrape(ctx, nil, "http://"+p.Metrics+"/metrics")
	if err != nil {
		return -1
	}
	return ss.Sum(name, labels)
}

// Logs returns everything the provider wrote.
func (p *Provider) Logs() string {
	b, _ := os.ReadFile(p.LogPath())
	return string(b)
}
