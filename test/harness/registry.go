package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgimage "github.com/widgetco/crossplane-widget/package/image"
	"github.com/widgetco/crossplane-widget/test/lib/registry"
)

// RegistryUser is the loopback registry's one account. Its password is
// random per harness and never leaves the harness: PushPackage and
// CopyPackage use it, CreateRegistryPullSecret writes it into a pull Secret,
// and RegistryCanary hands it to a leak scan.
const RegistryUser = registry.User

// LoopbackPullSecret is the pull Secret for the loopback registry that Start
// creates in Crossplane's namespace. InstallFunction and InstallProvider name
// it in the packages' spec.packagePullSecrets; a Configuration's
// dependencies need an ImageConfig instead (see CreateRegistryPullSecret).
const LoopbackPullSecret = "loopback-registry" //nolint:gosec // The name of a Secret, not a credential.

// CreateRegistryPullSecret creates (or updates) the Secret name in
// Crossplane's namespace, of type kubernetes.io/dockerconfigjson, holding
// the loopback registry's credentials: what a platform team creates for a
// private registry, for an ImageConfig's
// spec.registry.authentication.pullSecretRef or a package's
// spec.packagePullSecrets.
func (h *Harness) CreateRegistryPullSecret(ctx context.Context, name string) error {
	cfg, err := h.registry.DockerConfigJSON()
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
	return Canary{Kind: "registry password", Value: h.registry.Auth.Password}
}

// RegistryHost is the loopback registry's host:port (127.0.0.1:PORT).
func (h *Harness) RegistryHost() string { return h.registry.Host }

// PackageRef returns the loopback registry reference for repo:tag, e.g.
// PackageRef("function-widget:v0.1.0") is
// "127.0.0.1:PORT/function-widget:v0.1.0".
func (h *Harness) PackageRef(repoTag string) string { return h.registry.Host + "/" + repoTag }

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
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(h.registry.Keychain())); err != nil {
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
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(h.registry.Keychain())); err != nil {
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
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(h.registry.Keychain())}
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
	if strings.HasPrefix(ref, h.registry.Host+"/") {
		return ref, nil
	}
	first, _, found := strings.Cut(ref, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return "", errors.Errorf("cannot push to %q: only the loopback registry %s is allowed", ref, h.registry.Host)
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
