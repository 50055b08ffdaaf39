package harness

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/widgetco/crossplane-widget/test/lib/registry"
)

func TestParseDockerConfig(t *testing.T) {
	own, err := registry.DockerConfigJSON("127.0.0.1:5000", authn.Basic{Username: "u", Password: "p:w"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		config string
		want   map[string]authn.AuthConfig
	}{
		"Own": {
			reason: "What CreateRegistryPullSecret writes reads back; a password may hold a colon.",
			config: string(own),
			want:   map[string]authn.AuthConfig{"127.0.0.1:5000": {Username: "u", Password: "p:w"}},
		},
		"AuthOnly": {
			reason: "kubectl create secret docker-registry and docker login may write only auth; keys may be URLs.",
			config: `{"auths":{"https://xpkg.example.com/v1/":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("a:b")) + `"}}}`,
			want:   map[string]authn.AuthConfig{"xpkg.example.com": {Username: "a", Password: "b"}},
		},
		"Malformed": {
			reason: "A Secret that is not a docker config gives no credentials.",
			config: `{"auths":`,
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got := parseDockerConfig([]byte(tc.config))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nparseDockerConfig(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
