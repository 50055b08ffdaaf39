package registry

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
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// TestRegistryAuth pulls from the registry with go-containerregistry's
// client - what Crossplane's package manager and the node use - with and
// without its credentials, and reads the registry's log afterwards.
func TestRegistryAuth(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "registry.log")
	reg, err := Start("127.0.0.1:0", logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	ctx := context.Background()
	ref, err := name.ParseReference(reg.Host + "/widgetco/private:v1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(&reg.Auth)); err != nil {
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
			auth:       &authn.Basic{Username: User, Password: wrong},
			wantStatus: http.StatusUnauthorized,
		},
		"WrongUser": {
			reason:     "The right password for another user is refused.",
			auth:       &authn.Basic{Username: "someone", Password: reg.Auth.Password},
			wantStatus: http.StatusUnauthorized,
		},
		"Credentials": {
			reason: "The registry's credentials, answering its Basic challenge, pull the image.",
			auth:   &authn.Basic{Username: User, Password: reg.Auth.Password},
		},
		"CredentialsAsAuth": {
			reason: "The same credentials as a docker config's auth field work too.",
			auth:   authn.FromConfig(authn.AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte(User + ":" + reg.Auth.Password))}),
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
		resp, err := http.Get("http://" + reg.Host + "/v2/") //nolint:noctx // A test's one request.
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
			"the password":                   reg.Auth.Password,
			"a wrong password tried":         wrong,
			"the credentials, base64":        base64.StdEncoding.EncodeToString([]byte(User + ":" + reg.Auth.Password)),
			"the password, base64 (no user)": strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(reg.Auth.Password)), "="),
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

// TestPublicRead reads from a registry whose "crossplane/" repositories are
// public: an anonymous pull of them works, of any other repository (or by a
// path that only looks like theirs) is refused, and a push always needs the
// credentials.
func TestPublicRead(t *testing.T) {
	reg, err := Start("127.0.0.1:0", filepath.Join(t.TempDir(), "registry.log"), "crossplane/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	ctx := context.Background()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"crossplane/crossplane:v1", "widgetco/private:v1"} {
		ref, err := name.ParseReference(reg.Host + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(authn.Anonymous)); err == nil {
			t.Errorf("anonymous push to %s: no error, want it refused", repo)
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(&reg.Auth)); err != nil {
			t.Fatalf("push to %s with the credentials: %v", repo, err)
		}
	}
	cases := map[string]struct {
		reason string
		path   string
		want   int
	}{
		"PublicManifest":  {reason: "A public repository's manifest needs no credentials.", path: "/v2/crossplane/crossplane/manifests/v1", want: http.StatusOK},
		"PrivateManifest": {reason: "Any other repository's does.", path: "/v2/widgetco/private/manifests/v1", want: http.StatusUnauthorized},
		"Catalog":         {reason: "Listing repositories is not a read of a public one.", path: "/v2/_catalog", want: http.StatusUnauthorized},
		"DotDot":          {reason: "A path that climbs out of the public prefix is refused.", path: "/v2/crossplane/../widgetco/private/manifests/v1", want: http.StatusUnauthorized},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+reg.Host+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.v2+json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s\nGET %s: status %d, want %d", tc.reason, tc.path, resp.StatusCode, tc.want)
			}
		})
	}
}
