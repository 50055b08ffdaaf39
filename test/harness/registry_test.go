package harness

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// TestRegistryAuth pulls from the loopback registry with go-containerregistry's
// client - what Crossplane's package manager and the node use - with and
// without its credentials, and reads the registry's log afterwards.
func TestRegistryAuth(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "registry.log")
	reg, err := startRegistry(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.close() })
	ctx := context.Background()
	ref, err := name.ParseReference(reg.host + "/widgetco/private:v1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(&reg.auth)); err != nil {
		t.Fatalf("push with the registry's credentials: %v", err)
	}
	const wrong = "not-the-password-0123"

	cases := map[string]struct {
		reason string
		auth   authn.Authenticator
		// wantStatus is the HTTP status of the refusal; 0 for success.
		wantStatus int
	}{
		"Anonymous": {
			reason:     "A pull without credentials is refused, as a private registry refuses it.",
			auth:       authn.Anonymous,
			wantStatus: http.StatusUnauthorized,
		},
		"WrongPassword": {
			reason:     "The right user with a wrong password is refused.",
			auth:       &authn.Basic{Username: RegistryUser, Password: wrong},
			wantStatus: http.StatusUnauthorized,
		},
		"WrongUser": {
			reason:     "The right password for another user is refused.",
			auth:       &authn.Basic{Username: "someone", Password: reg.auth.Password},
			wantStatus: http.StatusUnauthorized,
		},
		"Credentials": {
			reason: "The registry's credentials, answering its Basic challenge, pull the image.",
			auth:   &authn.Basic{Username: RegistryUser, Password: reg.auth.Password},
		},
		"CredentialsAsAuth": {
			reason: "The same credentials as a docker config's auth field work too.",
			auth:   authn.FromConfig(authn.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte(RegistryUser + ":" + reg.auth.Password))}),
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			_, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(tc.auth))
			got := 0
			var terr *transport.Error
			if err != nil {
				if !errors.As(err, &terr) {
					t.Fatalf("%s\nremote.Image(...): %v, want a *transport.Error", tc.reason, err)
				}
				got = terr.StatusCode
			}
			if diff := cmp.Diff(tc.wantStatus, got); diff != "" {
				t.Errorf("%s\nremote.Image(...) status: -want, +got:\n%s\n(error: %v)", tc.reason, diff, err)
			}
			if tc.wantStatus != 0 && !strings.Contains(err.Error(), "UNAUTHORIZED") {
				t.Errorf("%s\nerror %q does not say UNAUTHORIZED, as Crossplane shows it", tc.reason, err)
			}
		})
	}

	t.Run("Challenge", func(t *testing.T) {
		// What the client's ping sees: a Basic challenge on /v2/.
		resp, err := http.Get("http://" + reg.host + "/v2/") //nolint:noctx // A test's one request.
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if diff := cmp.Diff(http.StatusUnauthorized, resp.StatusCode); diff != "" {
			t.Errorf("GET /v2/ anonymously: -want, +got:\n%s", diff)
		}
		if diff := cmp.Diff(`Basic realm="widgetco loopback registry"`, resp.Header.Get("WWW-Authenticate")); diff != "" {
			t.Errorf("WWW-Authenticate: -want, +got:\n%s", diff)
		}
	})

	t.Run("Log", func(t *testing.T) {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		log := string(b)
		for what, s := range map[string]string{
			"the password":                   reg.auth.Password,
			"a wrong password tried":         wrong,
			"the credentials, base64":        base64.StdEncoding.EncodeToString([]byte(RegistryUser + ":" + reg.auth.Password)),
			"the password, base64 (no user)": strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(reg.auth.Password)), "="),
		} {
			if strings.Contains(log, s) {
				t.Errorf("the registry's log holds %s", what)
			}
		}
		for _, want := range []string{"401 refused: no credentials", "401 refused: wrong password for user widgetco", "401 refused: unknown user"} {
			if !strings.Contains(log, want) {
				t.Errorf("the registry's log does not say %q:\n%s", want, log)
			}
		}
	})
}

func TestParseDockerConfig(t *testing.T) {
	own, err := dockerConfigJSON("127.0.0.1:5000", authn.Basic{Username: "u", Password: "p:w"})
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
