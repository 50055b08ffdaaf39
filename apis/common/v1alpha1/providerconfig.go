package v1alpha1

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// APIConnection says where a Widget API is served and how to trust its TLS
// certificate.
type APIConnection struct {
	// Endpoint of the Widget API: an absolute http:// or https:// URL with a
	// host and an optional path prefix, such as https://widgets.example.com.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	// +kubebuilder:validation:XValidation:rule="isURL(self) && size(url(self).getHostname()) > 0",message="endpoint must be an absolute URL with a host, such as https://widgets.example.com"
	Endpoint string `json:"endpoint"`

	// CABundle is one or more PEM-encoded CA certificates that the provider
	// trusts, instead of the system's trusted CAs, when it connects to an
	// https endpoint. Set it for a Widget API whose certificate is issued by
	// a private CA.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN CERTIFICATE-----')",message="caBundle must hold one or more PEM-encoded certificates (-----BEGIN CERTIFICATE----- blocks)"
	CABundle string `json:"caBundle,omitempty"`
}

// ProviderCredentials say where the provider finds its Widget API token. The
// token may be in a Secret in any namespace, or, for a Widget API that
// accepts identity tokens, in a file such as a projected ServiceAccount
// token. ClusterProviderConfig and the cluster-scoped ProviderConfig use
// them: only a platform team can make the provider read a file.
//
// +kubebuilder:validation:XValidation:rule="self.source != 'Secret' || has(self.secretRef)",message="secretRef is required when source is Secret: name the Secret, its namespace and the key that holds the Widget API token"
// +kubebuilder:validation:XValidation:rule="self.source != 'Filesystem' || has(self.fs)",message="fs is required when source is Filesystem: name the token file, such as a projected ServiceAccount token"
type ProviderCredentials struct {
	// Source of the Widget API token. Secret reads it from the Secret key
	// that secretRef selects; Filesystem reads it from the file that fs
	// names, such as a projected ServiceAccount token for the Widget API's
	// audience.
	// +kubebuilder:validation:Enum=Secret;Filesystem
	Source xpv2.CredentialsSource `json:"source"`

	// SecretRef selects the Secret key that holds the Widget API bearer
	// token. The provider reads the token whenever it connects to the API,
	// so replacing the token in the Secret needs no provider restart.
	// +optional
	SecretRef *xpv2.SecretKeySelector `json:"secretRef,omitempty"`

	// Fs names the file that holds the Widget API bearer token, with source
	// Filesystem.
	// +optional
	Fs *TokenFileSelector `json:"fs,omitempty"`
}

// TokenFileSelector names a file in the provider's container that holds a
// Widget API token, typically a projected ServiceAccount token that the
// kubelet rotates. The provider reads it again at least every 10 seconds
// and never uses a token past its expiry.
type TokenFileSelector struct {
	// Path of the token file: absolute, inside the provider's token file
	// directory (--token-file-dir, default /var/run/secrets/widgetco.io),
	// such as /var/run/secrets/widgetco.io/serviceaccount/token. The
	// provider refuses any other path, so its own Kubernetes credentials
	// can never be sent to a Widget API.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
}

// LocalProviderCredentials say where the provider finds its Widget API token
// for a namespaced ProviderConfig. The Secret must be in the ProviderConfig's
// own namespace: the selector has no namespace field, so a ProviderConfig
// cannot make the provider read a Secret in another namespace.
//
// +kubebuilder:validation:XValidation:rule="self.source != 'Secret' || has(self.secretRef)",message="secretRef is required when source is Secret: name the Secret in this namespace and the key that holds the Widget API token"
type LocalProviderCredentials struct {
	// Source of the Widget API token. Secret is the only supported source:
	// the token is read from the Secret key that secretRef selects.
	// +kubebuilder:validation:Enum=Secret
	Source xpv2.CredentialsSource `json:"source"`

	// SecretRef selects the key of a Secret in this ProviderConfig's
	// namespace that holds the Widget API bearer token. The provider reads
	// the token whenever it connects to the API, so replacing the token in
	// the Secret needs no provider restart.
	// +optional
	SecretRef *xpv2.LocalSecretKeySelector `json:"secretRef,omitempty"`
}

// ProviderConfigSpec configures how the provider connects to a Widget API.
// ClusterProviderConfig and the cluster-scoped ProviderConfig use it.
type ProviderConfigSpec struct {
	APIConnection `json:",inline"`

	// Credentials the provider authenticates to the Widget API with. The
	// token itself is never part of a ProviderConfig.
	Credentials ProviderCredentials `json:"credentials"`
}

// LocalProviderConfigSpec configures how the provider connects to a Widget
// API for the managed resources in one namespace. The namespaced
// ProviderConfig uses it.
type LocalProviderConfigSpec struct {
	APIConnection `json:",inline"`

	// Credentials the provider authenticates to the Widget API with. The
	// token itself is never part of a ProviderConfig.
	Credentials LocalProviderCredentials `json:"credentials"`
}

// Resolve returns the ProviderConfigSpec equivalent to this one for a
// ProviderConfig in the supplied namespace: its Secret reference points into
// that namespace. Callers must pass the ProviderConfig's own namespace.
func (s LocalProviderConfigSpec) Resolve(namespace string) ProviderConfigSpec {
	out := ProviderConfigSpec{
		APIConnection: s.APIConnection,
		Credentials:   ProviderCredentials{Source: s.Credentials.Source},
	}
	if s.Credentials.SecretRef != nil {
		out.Credentials.SecretRef = s.Credentials.SecretRef.ToSecretKeySelector(namespace)
	}
	return out
}

// ProviderConfigStatus is the observed state of any of the provider's
// ProviderConfig kinds: its conditions and how many managed resources use
// it.
type ProviderConfigStatus struct {
	xpv2.ProviderConfigStatus `json:",inline"`
}
