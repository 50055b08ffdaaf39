package harness

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pullKeychain returns the credentials the node pulls a pod's images with,
// as a kubelet finds them: the pod's imagePullSecrets, then those of its
// ServiceAccount (which the ServiceAccount admission plugin copies into a
// pod), each a kubernetes.io/dockerconfigjson Secret in the pod's namespace.
// A registry is matched by host; the first Secret naming it wins. A Secret
// that is missing or is not a docker config is skipped, as a kubelet skips
// it; with no match the pull is anonymous and a private registry refuses it
// (ImagePullBackOff with the registry's UNAUTHORIZED).
func (e *podEnv) pullKeychain(ctx context.Context, spec corev1.PodSpec) authn.Keychain {
	names := make([]string, 0, len(spec.ImagePullSecrets))
	for _, r := range spec.ImagePullSecrets {
		names = append(names, r.Name)
	}
	if spec.ServiceAccountName != "" {
		sa := &corev1.ServiceAccount{}
		if err := e.kube.Get(ctx, types.NamespacedName{Namespace: e.namespace, Name: spec.ServiceAccountName}, sa); err == nil {
			for _, r := range sa.ImagePullSecrets {
				names = append(names, r.Name)
			}
		}
	}
	auths := map[string]authn.AuthConfig{}
	for _, n := range names {
		s := &corev1.Secret{}
		if err := e.kube.Get(ctx, types.NamespacedName{Namespace: e.namespace, Name: n}, s); err != nil || s.Type != corev1.SecretTypeDockerConfigJson {
			continue
		}
		for host, a := range parseDockerConfig(s.Data[corev1.DockerConfigJsonKey]) {
			if _, ok := auths[host]; !ok {
				auths[host] = a
			}
		}
	}
	return keychainFunc(func(r authn.Resource) (authn.Authenticator, error) {
		if a, ok := auths[r.RegistryStr()]; ok {
			return authn.FromConfig(a), nil
		}
		return authn.Anonymous, nil
	})
}

// parseDockerConfig returns the credentials of a .dockerconfigjson by
// registry host. Keys may be URLs ("https://host/v1/"); the user and
// password may be given only as "auth", base64 of "user:password". It
// returns nothing for a malformed config.
func parseDockerConfig(b []byte) map[string]authn.AuthConfig {
	var cfg struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil
	}
	out := make(map[string]authn.AuthConfig, len(cfg.Auths))
	for k, a := range cfg.Auths {
		// authn.AuthConfig's JSON decoding fills the user and password
		// from "auth"; this is for a value it could not split.
		if a.Username == "" && a.Auth != "" {
			if dec, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
				a.Username, a.Password, _ = strings.Cut(string(dec), ":")
			}
		}
		if a.Username != "" {
			a.Auth = ""
		}
		host := strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		out[host] = a
	}
	return out
}

// keychainFunc adapts a function to authn.Keychain.
type keychainFunc func(authn.Resource) (authn.Authenticator, error)

func (f keychainFunc) Resolve(r authn.Resource) (authn.Authenticator, error) { return f(r) }
