// Package registry serves a private OCI registry for tests:
// go-containerregistry's in-memory registry over plain HTTP behind Basic
// authentication, on an address the caller picks (loopback, or a node's
// address that pods reach).
package registry

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// User is the registry's one account. Its password is random per registry.
const User = "widgetco"

// realm is the realm of the registry's Basic challenge.
const realm = "widgetco loopback registry"

// A Registry is a running private registry. Crossplane (like every
// go-containerregistry client) talks plain HTTP to registries on loopback
// and private (RFC 1918) addresses without being told to; containerd needs
// a hosts.toml saying so.
type Registry struct {
	// Host is host:port.
	Host string
	// Auth is the one account's credentials.
	Auth authn.Basic
	srv  *http.Server
	logf *os.File
}

// Start serves a registry on listen (host:port; port 0 picks one) and logs
// its requests, and refusals by reason, to logPath. Reads of the
// repositories under each of public ("crossplane/", say) need no
// credentials, as a registry's public projects; everything else does.
func Start(listen, logPath string, public ...string) (*Registry, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.Wrap(err, "cannot open registry log")
	}
	l, err := net.Listen("tcp", listen) //nolint:noctx // ctx-free by design: Listen's context only bounds resolving the address, and callers pass a literal IP
	if err != nil {
		_ = f.Close()
		return nil, errors.Wrap(err, "cannot listen for the OCI registry")
	}
	auth := authn.Basic{Username: User, Password: "reg-" + rand.Text()}
	logger := log.New(f, "", log.LstdFlags)
	srv := &http.Server{
		Handler:           requireBasicAuth(auth, public, registry.New(registry.Logger(logger)), logger),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	return &Registry{Host: l.Addr().String(), Auth: auth, srv: srv, logf: f}, nil
}

// requireBasicAuth serves next only to requests with want's credentials.
// Every other request gets what a private registry answers: 401 with a
// Basic challenge, which go-containerregistry's client (and so Crossplane's
// package manager, crane and the Crossplane CLI) and containerd answer with
// the credentials they hold for the host, and an UNAUTHORIZED error in the
// registry API's format, which those clients show. Refusals are logged by
// reason, never with the password tried.
//
// Basic rather than the bearer token flow of Docker Hub or ghcr.io: the
// client sends the same credentials either way (for a bearer challenge to
// the token endpoint, then the token), so what is under test - which
// credentials a client picks for an image - is the same, and Basic needs no
// token service.
func requireBasicAuth(want authn.Basic, public []string, next http.Handler, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicRead(r, public) {
			next.ServeHTTP(w, r)
			return
		}
		user, password, ok := r.BasicAuth()
		userOK := subtle.ConstantTimeCompare([]byte(user), []byte(want.Username)) == 1
		passwordOK := subtle.ConstantTimeCompare([]byte(password), []byte(want.Password)) == 1
		if ok && userOK && passwordOK {
			next.ServeHTTP(w, r)
			return
		}
		why := "no credentials"
		switch {
		case ok && userOK:
			why = "wrong password for user " + want.Username
		case ok:
			// What was sent as a user name might be a password.
			why = "unknown user"
		}
		logger.Printf("%s %s 401 refused: %s", r.Method, r.URL.Path, why)
		w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
	})
}

// publicRead is true for a read (GET or HEAD) of a repository under one of
// public: /v2/<repository>/manifests/... or /blobs/..., after cleaning the
// path (no "..").
func publicRead(r *http.Request, public []string) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := path.Clean(r.URL.Path)
	if p != r.URL.Path {
		return false
	}
	repo, ok := strings.CutPrefix(p, "/v2/")
	if !ok || (!strings.Contains(repo, "/manifests/") && !strings.Contains(repo, "/blobs/")) {
		return false
	}
	for _, pre := range public {
		if pre != "" && strings.HasSuffix(pre, "/") && strings.HasPrefix(repo, pre) {
			return true
		}
	}
	return false
}

// Close stops serving.
func (r *Registry) Close() error {
	if r.srv == nil {
		// Not started here: someone else's registry.
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	_ = r.logf.Close()
	return errors.Wrap(err, "cannot stop the OCI registry")
}

// Keychain resolves the registry to its credentials and every other
// registry to anonymous.
func (r *Registry) Keychain() authn.Keychain {
	return keychainFunc(func(res authn.Resource) (authn.Authenticator, error) {
		if res.RegistryStr() == r.Host {
			return &r.Auth, nil
		}
		return authn.Anonymous, nil
	})
}

// keychainFunc adapts a function to authn.Keychain.
type keychainFunc func(authn.Resource) (authn.Authenticator, error)

func (f keychainFunc) Resolve(r authn.Resource) (authn.Authenticator, error) { return f(r) }

// DockerConfigJSON is a kubernetes.io/dockerconfigjson Secret's
// .dockerconfigjson for the registry: what `kubectl create secret
// docker-registry` writes.
func (r *Registry) DockerConfigJSON() ([]byte, error) { return DockerConfigJSON(r.Host, r.Auth) }

// DockerConfigJSON is a .dockerconfigjson holding a's credentials for host.
func DockerConfigJSON(host string, a authn.Basic) ([]byte, error) {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	b, err := json.Marshal(map[string]map[string]entry{"auths": {host: {
		Username: a.Username,
		Password: a.Password,
		Auth:     base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password)),
	}}})
	return b, errors.Wrap(err, "cannot encode a docker config")
}
