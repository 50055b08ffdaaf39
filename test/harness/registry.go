package harness

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
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgimage "github.com/widgetco/crossplane-widget/package/image"
)

// RegistryUser is the loopback registry's one account. Its password is
// random per harness and never leaves the harness: PushPackage and
// CopyPackage use it, CreateRegistryPullSecret writes it into a pull Secret,
// and RegistryCanary hands it to a leak scan.
const RegistryUser = "widgetco"

// LoopbackPullSecret is the pull Secret for the loopback registry that Start
// creates in Crossplane's namespace. InstallFunction and InstallProvider name
// it in the packages' spec.packagePullSecrets; a Configuration's
// dependencies need an ImageConfig instead (see CreateRegistryPullSecret).
const LoopbackPullSecret = "loopback-registry" //nolint:gosec // The name of a Secret, not a credential.

// registryRealm is the realm of the registry's Basic challenge.
const registryRealm = "widgetco loopback registry"

// loopbackRegistry is go-containerregistry's in-memory OCI registry served
// over plain HTTP on 127.0.0.1, behind Basic authentication: like a private
// registry, it refuses anonymous pulls. Crossplane (like every
// go-containerregistry client) talks plain HTTP to loopback registries
// without being told to.
type loopbackRegistry struct {
	host string
	auth authn.Basic
	srv  *http.Server
	logf *os.File
}

func startRegistry(logPath string) (*loopbackRegistry, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.Wrap(err, "cannot open registry log")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = f.Close()
		return nil, errors.Wrap(err, "cannot listen for the OCI registry")
	}
	auth := authn.Basic{Username: RegistryUser, Password: "reg-" + rand.Text()}
	logger := log.New(f, "", log.LstdFlags)
	srv := &http.Server{
		Handler:           requireBasicAuth(auth, registry.New(registry.Logger(logger)), logger),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(l) }()
	return &loopbackRegistry{host: l.Addr().String(), auth: auth, srv: srv, logf: f}, nil
}

// requireBasicAuth serves next only to requests with want's credentials.
// Every other request gets what a private registry answers: 401 with a
// Basic challenge, which go-containerregistry's client (and so Crossplane's
// package manager, crane and the Crossplane CLI) answers with the
// credentials its keychain holds for the host, and an UNAUTHORIZED error in
// the registry API's format, which those clients show. Refusals are logged
// by reason, never with the password tried.
//
// Basic rather than the bearer token flow of Docker Hub or ghcr.io: the
// client sends the same keychain credentials either way (for a bearer
// challenge to the token endpoint, then the token), so what is under test -
// which credentials Crossplane picks for an image - is the same, and Basic
// needs no token service.
func requireBasicAuth(want authn.Basic, next http.Handler, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		w.Header().Set("WWW-Authenticate", `Basic realm="`+registryRealm+`"`)
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
	})
}

func (r *loopbackRegistry) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	_ = r.logf.Close()
	return errors.Wrap(err, "cannot stop the OCI registry")
}

// keychain resolves the loopback registry to its credentials and every other
// registry to anonymous.
func (r *loopbackRegistry) keychain() authn.Keychain {
	return keychainFunc(func(res authn.Resource) (authn.Authenticator, error) {
		if res.RegistryStr() == r.host {
			return &r.auth, nil
		}
		return authn.Anonymous, nil
	})
}

// keychainFunc adapts a function to authn.Keychain.
type keychainFunc func(authn.Resource) (authn.Authenticator, error)

func (f keychainFunc) Resolve(r authn.Resource) (authn.Authenticator, error) { return f(r) }

// dockerConfigJSON is a kubernetes.io/dockerconfigjson Secret's
// .dockerconfigjson: what `kubectl create secret docker-registry` writes.
func dockerConfigJSON(host string, a authn.Basic) ([]byte, error) {
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

// CreateRegistryPullSecret creates (or updates) the Secret name in
// Crossplane's namespace, of type kubernetes.io/dockerconfigjson, holding
// the loopback registry's credentials: what a platform team creates for a
// private registry, for an ImageConfig's
// spec.registry.authentication.pullSecretRef or a package's
// spec.packagePullSecrets.
func (h *Harness) CreateRegistryPullSecret(ctx context.Context, name string) error {
	cfg, err := dockerConfigJSON(h.registry.host, h.registry.auth)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.opts.Namespace, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
	err = h.kube.Create(ctx, s)
	if kerrors.IsAlreadyExists(err) {
		err = h.kube.Update(ctx, s)
	}
	return errors.Wrapf(err, "cannot write the registry pull Secret %s", name)
}

// RegistryCanary is the loopback registry's password as a leak canary: it
// belongs only in pull Secrets.
func (h *Harness) RegistryCanary() Canary {
	return Canary{Kind: "registry password", Value: h.registry.auth.Password}
}

// RegistryHost is the loopback registry's host:port (127.0.0.1:PORT).
func (h *Harness) RegistryHost() string { return h.registry.host }

// PackageRef returns the loopback registry reference for repo:tag, e.g.
// PackageRef("function-widget:v0.1.0") is
// "127.0.0.1:PORT/function-widget:v0.1.0".
func (h *Harness) PackageRef(repoTag string) string { return h.registry.host + "/" + repoTag }

// PushPackage pushes the package file xpkgPath (as written by
// `crossplane xpkg build`) to the loopback registry and returns its full
// reference. ref is either "repo:tag" (pushed to the loopback registry) or
// a full reference that already names the loopback registry; a reference
// to any other registry is refused.
func (h *Harness) PushPackage(ctx context.Context, xpkgPath, ref string) (string, error) {
	full, err := h.loopbackRef(ref)
	if err != nil {
		return "", err
	}
	t := time.Now()
	r, err := name.ParseReference(full, name.StrictValidation)
	if err != nil {
		return "", errors.Wrapf(err, "cannot parse package reference %q (it needs a tag)", full)
	}
	img, err := tarball.ImageFromPath(xpkgPath, nil)
	if err != nil {
		return "", errors.Wrapf(err, "cannot read package %s", xpkgPath)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(h.registry.keychain())); err != nil {
		return "", errors.Wrapf(err, "cannot push package to %s", full)
	}
	h.log.Info("Pushed package", "ref", full, "file", xpkgPath, "duration", since(t))
	return full, nil
}

// PushImage pushes img to the loopback registry, with its credentials, and
// returns its full reference; ref is as PushPackage's.
func (h *Harness) PushImage(ctx context.Context, img v1.Image, ref string) (string, error) {
	full, err := h.loopbackRef(ref)
	if err != nil {
		return "", err
	}
	r, err := name.ParseReference(full, name.StrictValidation)
	if err != nil {
		return "", errors.Wrapf(err, "cannot parse image reference %q (it needs a tag)", full)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(h.registry.keychain())); err != nil {
		return "", errors.Wrapf(err, "cannot push image to %s", full)
	}
	return full, nil
}

// CopyPackage copies the package (image or index) from to to, both in the
// loopback registry, and returns to's full reference: mirroring, as
// `crane copy` does. Each is "repo:tag" or a full loopback reference.
func (h *Harness) CopyPackage(ctx context.Context, from, to string) (string, error) {
	refs := make([]name.Reference, 0, 2)
	for _, ref := range []string{from, to} {
		full, err := h.loopbackRef(ref)
		if err != nil {
			return "", err
		}
		r, err := name.ParseReference(full, name.StrictValidation)
		if err != nil {
			return "", errors.Wrapf(err, "cannot parse package reference %q", full)
		}
		refs = append(refs, r)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(h.registry.keychain())}
	d, err := remote.Get(refs[0], opts...)
	if err != nil {
		return "", errors.Wrapf(err, "cannot get package %s", refs[0])
	}
	if d.MediaType.IsIndex() {
		idx, err := d.ImageIndex()
		if err != nil {
			return "", errors.Wrapf(err, "cannot read index %s", refs[0])
		}
		err = remote.WriteIndex(refs[1], idx, opts...)
		return refs[1].String(), errors.Wrapf(err, "cannot copy %s to %s", refs[0], refs[1])
	}
	img, err := d.Image()
	if err != nil {
		return "", errors.Wrapf(err, "cannot read image %s", refs[0])
	}
	err = remote.Write(refs[1], img, opts...)
	return refs[1].String(), errors.Wrapf(err, "cannot copy %s to %s", refs[0], refs[1])
}

// loopbackRef resolves ref against the loopback registry.
func (h *Harness) loopbackRef(ref string) (string, error) {
	if strings.HasPrefix(ref, h.registry.host+"/") {
		return ref, nil
	}
	first, _, found := strings.Cut(ref, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return "", errors.Errorf("cannot push to %q: only the loopback registry %s is allowed", ref, h.registry.host)
	}
	return h.PackageRef(ref), nil
}

// PackageBuild describes a `crossplane xpkg build`.
type PackageBuild struct {
	// Root is the directory holding crossplane.yaml and the package's YAML
	// (CRDs, ...).
	Root string
	// Out is the package file to write.
	Out string
	// ExamplesRoot is the directory of examples to include (default: none).
	ExamplesRoot string
	// EmbedRuntimeImageTarball optionally names an OCI image tarball to
	// embed as the package's runtime.
	EmbedRuntimeImageTarball string
	// RuntimeBinary, instead of EmbedRuntimeImageTarball, is a static Linux
	// binary for this machine's architecture: BuildPackage builds a runtime
	// image of it (package/image: entrypoint /usr/local/bin/<name>, user
	// 65532) and embeds that. Crossplane's Deployment runtime runs the
	// package's image, so a Function or Provider package needs one of the
	// two.
	RuntimeBinary string
}

// BuildFunction builds a Function package named name for a function's
// static Linux binary, with the smallest crossplane.yaml Crossplane v2
// accepts, under dir, and returns the package file's path: an upstream
// function (function-auto-ready, function-patch-and-transform) as a
// package.
func BuildFunction(ctx context.Context, crank, dir, name, bin string) (string, error) {
	root := filepath.Join(dir, "pkg-"+name)
	if err := os.MkdirAll(root, 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create the package directory")
	}
	meta := "apiVersion: meta.pkg.crossplane.io/v1beta1\nkind: Function\nmetadata:\n  name: " + name + "\nspec:\n  crossplane:\n    version: \">=v2.0.0\"\n"
	if err := os.WriteFile(filepath.Join(root, "crossplane.yaml"), []byte(meta), 0o600); err != nil {
		return "", errors.Wrap(err, "cannot write crossplane.yaml")
	}
	out := filepath.Join(dir, name+".xpkg")
	return out, BuildPackage(ctx, crank, PackageBuild{Root: root, Out: out, RuntimeBinary: bin})
}

// BuildPackage runs `crank xpkg build` (the Crossplane CLI) for b.
func BuildPackage(ctx context.Context, crank string, b PackageBuild) error {
	if crank == "" {
		return errors.Wrap(ErrToolsMissing, "CRANK_BIN is unset")
	}
	examples := b.ExamplesRoot
	if examples == "" {
		// crank's default is ./examples; point it somewhere empty instead.
		d, err := os.MkdirTemp("", "xpkg-no-examples-")
		if err != nil {
			return errors.Wrap(err, "cannot create empty examples directory")
		}
		defer os.RemoveAll(d) //nolint:errcheck // Best-effort cleanup of an empty dir.
		examples = d
	}
	if err := os.MkdirAll(filepath.Dir(b.Out), 0o750); err != nil {
		return errors.Wrap(err, "cannot create package output directory")
	}
	args := []string{"xpkg", "build", "--package-root=" + b.Root, "--package-file=" + b.Out, "--examples-root=" + examples}
	if b.RuntimeBinary != "" {
		tb, err := runtimeImageTarball(b.RuntimeBinary, b.Out+".image.tar")
		if err != nil {
			return err
		}
		defer os.Remove(tb) //nolint:errcheck // Best-effort cleanup.
		b.EmbedRuntimeImageTarball = tb
	}
	if b.EmbedRuntimeImageTarball != "" {
		args = append(args, "--embed-runtime-image-tarball="+b.EmbedRuntimeImageTarball)
	}
	out, err := exec.CommandContext(ctx, crank, args...).CombinedOutput() //nolint:gosec // The binary comes from Tools.
	if err != nil {
		return errors.Wrapf(err, "cannot build package from %s: %s", b.Root, tail(out, 5))
	}
	return nil
}

// runtimeImageTarball builds the runtime image of a binary and writes it as
// a tarball to file.
func runtimeImageTarball(bin, file string) (string, error) {
	img, err := pkgimage.Build(pkgimage.Config{
		Binary:     bin,
		Entrypoint: "/usr/local/bin/" + filepath.Base(bin),
		Arch:       runtime.GOARCH,
		Created:    time.Unix(0, 0),
	})
	if err != nil {
		return "", errors.Wrapf(err, "cannot build a runtime image of %s", bin)
	}
	tag, err := name.NewTag("runtime.local/" + strings.ToLower(filepath.Base(bin)) + ":latest")
	if err != nil {
		return "", errors.Wrap(err, "cannot tag the runtime image")
	}
	return file, pkgimage.WriteTarball(img, tag, file)
}
