package xpkg_test

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/examples"
	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	opsv1alpha1 "github.com/crossplane/crossplane/apis/v2/ops/v1alpha1"
	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	pkgmetav1alpha1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1alpha1"
	pkgmetav1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1beta1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	admv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/widgetco/crossplane-widget/package/sign"
	"github.com/widgetco/crossplane-widget/package/xpkg"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// The commit the test packages claim to be built from.
const (
	version  = "v0.1.0-test"
	revision = "0123456789abcdef0123456789abcdef01234567"
	epoch    = "1763719200" // 2025-11-21T10:00:00Z
)

// TestPackages builds both packages for both architectures with the same
// command `make build` runs, builds them again from the same binaries,
// pushes both builds to a loopback registry with the command `make publish`
// runs, pulls them back and checks what Crossplane and a node would see:
// the multi-arch index, the package layer (crossplane.yaml and every CRD,
// parsed and linted by Crossplane's package parser), the examples, and the
// runtime image (entrypoint, user, platform, a static binary of the right
// architecture that reports the version).
func TestPackages(t *testing.T) {
	crank, cosign := os.Getenv("CRANK_BIN"), os.Getenv("COSIGN_BIN")
	if crank == "" || cosign == "" {
		t.Skip("CRANK_BIN or COSIGN_BIN is unset, so the packages are not built and signed: run eval \"$(bash hack/tools.sh env)\" first (make unit does)")
	}
	if testing.Short() {
		t.Skip("-short: building and pushing both packages for both architectures takes about a minute")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()

	// The command under test, built (once per run, without -race, so that
	// compressing the images is not slowed down by the race detector).
	cli, err := proc.Build(t.Context(), "github.com/widgetco/crossplane-widget/package/build")
	if err != nil {
		t.Fatal(err)
	}
	// publish signs with a key of the run, as make publish with COSIGN_KEY.
	signer := sign.Cosign{Bin: cosign, Password: "test-" + rand.Text()}
	keys := filepath.Join(tmp, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	key, pub, err := signer.GenerateKeyPair(t.Context(), keys)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"CRANK_BIN=" + crank,
		"COSIGN_BIN=" + cosign,
		"COSIGN_KEY=" + key,
		"COSIGN_PASSWORD=" + signer.Password,
		"SOURCE_DATE_EPOCH=" + epoch,
		"DOCKER_CONFIG=" + filepath.Join(tmp, "docker"), // no credential helpers
	}
	common := []string{"--repo-root", root, "--version", version, "--revision", revision}

	// Build twice. The second build reuses the first build's binaries:
	// compiling is reproducible on its own (-trimpath, -buildvcs=false, the
	// version through -ldflags) and is the slow part.
	outA, outB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	start := time.Now()
	summary := goRun(t, root, env, cli, append([]string{"xpkg", "--output-dir", outA}, common...)...)
	t.Logf("first build (compile and package) took %s:\n%s", time.Since(start).Round(time.Second), summary)
	start = time.Now()
	goRun(t, root, env, cli, append([]string{"xpkg", "--output-dir", outB, "--bin-dir", filepath.Join(outA, "bin"), "--no-compile"}, common...)...)
	t.Logf("second build (package only) took %s", time.Since(start).Round(time.Second))

	t.Run("Reproducible", func(t *testing.T) {
		a, b := hashes(t, outA, "xpkg", "image"), hashes(t, outB, "xpkg", "image")
		if len(a) != 9 {
			t.Errorf("want 4 packages, 4 runtime images and the Configuration, got %v", a)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("building the same commit twice: -first, +second:\n%s", diff)
		}
	})

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	goRun(t, root, env, cli, append([]string{"publish", "--output-dir", outA, "--registry", host + "/widgetco"}, common...)...)
	goRun(t, root, env, cli, append([]string{"publish", "--output-dir", outB, "--bin-dir", filepath.Join(outA, "bin"), "--registry", host + "/rebuilt"}, common...)...)

	t.Run("Signed", func(t *testing.T) {
		checkSigned(t, signer, pub, host)
	})

	t.Run(xpkg.Configuration.Name, func(t *testing.T) {
		img := pull(t, host+"/widgetco/"+xpkg.Configuration.Name+":"+version)
		checkReproduciblePushImage(t, img, host+"/rebuilt/"+xpkg.Configuration.Name+":"+version)
		b := &xpkg.Builder{RepoRoot: root, OutputDir: outA, Version: version}
		// publish builds the Configuration again for its registry, into
		// the output directory.
		checkPushedIsBuilt(t, img, b.ConfigurationFile(xpkg.Configuration))
		checkConfiguration(t, img, root, host+"/widgetco")
		checkExamples(t, img, root, xpkg.Package{Name: xpkg.Configuration.Name, Examples: xpkg.Configuration.Examples, Ignore: xpkg.Configuration.Ignore})
	})
	// What publish pushed to the other registry depends on that registry.
	t.Run(xpkg.Configuration.Name+"/rebuilt", func(t *testing.T) {
		checkConfiguration(t, pull(t, host+"/rebuilt/"+xpkg.Configuration.Name+":"+version), root, host+"/rebuilt")
	})

	for _, p := range xpkg.Packages {
		t.Run(p.Name, func(t *testing.T) {
			ref := host + "/widgetco/" + p.Name + ":" + version
			idx := pullIndex(t, ref)
			checkReproduciblePush(t, idx, host+"/rebuilt/"+p.Name+":"+version)
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			platforms := make([]string, 0, len(im.Manifests))
			for _, m := range im.Manifests {
				platforms = append(platforms, m.Platform.String())
			}
			sort.Strings(platforms)
			if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
				t.Errorf("index %s platforms: -want, +got:\n%s", ref, diff)
			}
			for _, m := range im.Manifests {
				arch := m.Platform.Architecture
				t.Run(arch, func(t *testing.T) {
					img, err := idx.Image(m.Digest)
					if err != nil {
						t.Fatal(err)
					}
					b := &xpkg.Builder{RepoRoot: root, OutputDir: outA, Version: version}
					checkPushedIsBuilt(t, img, b.XpkgFile(p, arch))
					checkPackageLayer(t, img, root, p)
					checkExamples(t, img, root, p)
					checkRuntime(t, img, p, arch)
				})
			}
		})
	}
}

// pull pulls one image.
func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	img, err := remote.Image(tag(t, ref))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// pullIndex pulls one image index.
func pullIndex(t *testing.T, ref string) v1.ImageIndex {
	t.Helper()
	idx, err := remote.Index(tag(t, ref))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return idx
}

func tag(t *testing.T, ref string) name.Tag {
	t.Helper()
	r, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// goRun runs a command in dir and returns its standard output.
func goRun(t *testing.T, dir string, env []string, cmd string, args ...string) string {
	t.Helper()
	c := exec.CommandContext(t.Context(), cmd, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(cmd), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// hashes returns the SHA-256 of every file in dir's subdirectories subs,
// by path relative to dir.
func hashes(t *testing.T, dir string, subs ...string) map[string]string {
	t.Helper()
	h := map[string]string{}
	for _, s := range subs {
		files, err := filepath.Glob(filepath.Join(dir, s, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			rel, _ := filepath.Rel(dir, f)
			h[rel] = hex.EncodeToString(sum[:])
		}
	}
	return h
}

// checkReproduciblePush checks that the second build, pushed elsewhere, has
// the same index digest: what a user pins does not depend on who built it.
func checkReproduciblePush(t *testing.T, idx v1.ImageIndex, other string) {
	t.Helper()
	o := pullIndex(t, other)
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if want != got {
		t.Errorf("index digest of the rebuilt package: want %s, got %s", want, got)
	}
}

// checkPushedIsBuilt checks that the pushed image has the built package's
// config and layers: crossplane xpkg push adds only layer annotations.
func checkPushedIsBuilt(t *testing.T, img v1.Image, file string) {
	t.Helper()
	built, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	digests := func(img v1.Image) []string {
		cn, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		ds := []string{"config " + cn.String()}
		for _, l := range ls {
			d, err := l.Digest()
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d.String())
		}
		return ds
	}
	if diff := cmp.Diff(digests(built), digests(img)); diff != "" {
		t.Errorf("pushed package vs %s: -built, +pushed:\n%s", filepath.Base(file), diff)
	}
}

// annotatedLayer returns the content of the one file in the layer that
// Crossplane's io.crossplane.xpkg annotation marks as kind, as Crossplane's
// package manager finds it.
func annotatedLayer(t *testing.T, img v1.Image, kind, file string) []byte {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var found []v1.Hash
	for _, l := range m.Layers {
		if l.Annotations["io.crossplane.xpkg"] == kind {
			found = append(found, l.Digest)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one layer annotated io.crossplane.xpkg: %s, got %d", kind, len(found))
	}
	l, err := img.LayerByDigest(found[0])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
	if len(files) != 1 || files[file] == nil {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		t.Fatalf("layer %s: want only %s, got %v", kind, file, names)
	}
	return files[file]
}

// newParser returns Crossplane's package parser with the schemes Crossplane's
// package manager uses (crossplane-runtime pkg/xpkg BuildMetaScheme and
// BuildObjectScheme; that package is not imported because it pulls in
// cosign and the cloud credential helpers).
func newParser(t *testing.T) *parser.PackageParser {
	t.Helper()
	meta, obj := kruntime.NewScheme(), kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{
		pkgmetav1alpha1.SchemeBuilder.AddToScheme, pkgmetav1beta1.SchemeBuilder.AddToScheme, pkgmetav1.SchemeBuilder.AddToScheme,
	} {
		if err := add(meta); err != nil {
			t.Fatal(err)
		}
	}
	for _, add := range []func(*kruntime.Scheme) error{
		xpextv1.AddToScheme, xpextv1alpha1.AddToScheme, opsv1alpha1.AddToScheme, xpextv2.AddToScheme,
		extv1beta1.AddToScheme, extv1.AddToScheme, admv1.AddToScheme,
	} {
		if err := add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return parser.New(meta, obj)
}

// linter is Crossplane's provider, function and configuration package
// linter (crossplane-runtime pkg/xpkg NewProviderLinter, NewFunctionLinter,
// NewConfigurationLinter): one meta object of the right kind with a valid
// version constraint, and only CRDs besides (XRDs and Compositions for a
// Configuration).
func linter(kind string) parser.Linter {
	oneMeta := func(pkg parser.Lintable) error {
		if n := len(pkg.GetMeta()); n != 1 {
			return fmt.Errorf("want one package meta object, got %d", n)
		}
		return nil
	}
	isKind := func(o kruntime.Object) error {
		switch o.(type) {
		case *pkgmetav1.Provider:
			if kind == "Provider" {
				return nil
			}
		case *pkgmetav1.Function:
			if kind == "Function" {
				return nil
			}
		case *pkgmetav1.Configuration:
			if kind == "Configuration" {
				return nil
			}
		}
		return fmt.Errorf("package meta type is %T, not %s", o, kind)
	}
	validSemver := func(o kruntime.Object) error {
		p, ok := o.(pkgmetav1.Pkg)
		if !ok || p.GetCrossplaneConstraints() == nil {
			return nil
		}
		_, err := semver.NewConstraint(p.GetCrossplaneConstraints().Version)
		return err
	}
	isCRD := func(o kruntime.Object) error {
		if _, ok := o.(*extv1.CustomResourceDefinition); !ok {
			return fmt.Errorf("object is a %T, not a CRD", o)
		}
		return nil
	}
	// crossplane-runtime's NewConfigurationLinter: XRDs and Compositions.
	isXRDOrComposition := func(o kruntime.Object) error {
		switch o.(type) {
		case *xpextv1.CompositeResourceDefinition, *xpextv2.CompositeResourceDefinition, *xpextv1.Composition:
			return nil
		}
		return fmt.Errorf("object is a %T, not an XRD or a Composition", o)
	}
	objects := isCRD
	if kind == "Configuration" {
		objects = isXRDOrComposition
	}
	return parser.NewPackageLinter(parser.PackageLinterFns(oneMeta), parser.ObjectLinterFns(isKind, validSemver), parser.ObjectLinterFns(objects))
}

// checkPackageLayer checks that the package layer holds crossplane.yaml and
// every CRD in the package's directory, unchanged, and that Crossplane's
// parser and linter accept it.
func checkPackageLayer(t *testing.T, img v1.Image, root string, p xpkg.Package) {
	t.Helper()
	y := annotatedLayer(t, img, "base", "package.yaml")
	ps := newParser(t)
	pkg, err := ps.Parse(t.Context(), io.NopCloser(bytes.NewReader(y)))
	if err != nil {
		t.Fatalf("Crossplane's parser rejects package.yaml: %v", err)
	}
	kind := map[string]string{"provider-widget": "Provider", "function-widget": "Function"}[p.Name]
	if err := linter(kind).Lint(pkg); err != nil {
		t.Fatalf("Crossplane's %s linter rejects the package: %v", kind, err)
	}

	// What is in the repository, parsed the same way.
	var files bytes.Buffer
	var crdFiles int
	err = filepath.WalkDir(filepath.Join(root, p.Root), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if filepath.Base(path) != "crossplane.yaml" {
			crdFiles++
		}
		files.WriteString("\n---\n")
		files.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ps.Parse(t.Context(), io.NopCloser(&files))
	if err != nil {
		t.Fatalf("cannot parse %s: %v", p.Root, err)
	}
	if diff := cmp.Diff(want.GetMeta(), pkg.GetMeta()); diff != "" {
		t.Errorf("package meta vs %s/crossplane.yaml: -want, +got:\n%s", p.Root, diff)
	}
	if got := len(pkg.GetObjects()); got != crdFiles || got == 0 {
		t.Errorf("package has %d objects, %s has %d CRD files", got, p.Root, crdFiles)
	}
	if diff := cmp.Diff(crdsByName(t, want.GetObjects()), crdsByName(t, pkg.GetObjects())); diff != "" {
		t.Errorf("package CRDs vs %s: -want, +got:\n%s", p.Root, diff)
	}

	m, ok := pkg.GetMeta()[0].(pkgmetav1.Pkg)
	if !ok {
		t.Fatalf("package meta is a %T", pkg.GetMeta()[0])
	}
	wantCaps := map[string][]string{"provider-widget": {"safe-start"}, "function-widget": {"composition", "operation"}}[p.Name]
	if diff := cmp.Diff(wantCaps, m.GetCapabilities()); diff != "" {
		t.Errorf("capabilities: -want, +got:\n%s", diff)
	}
	checkCrossplaneConstraint(t, p.Name, m.GetCrossplaneConstraints().Version)
	ann := pkg.GetMeta()[0].(interface{ GetAnnotations() map[string]string }).GetAnnotations()
	for _, k := range []string{"maintainer", "source", "license", "description", "readme"} {
		if strings.TrimSpace(ann["meta.crossplane.io/"+k]) == "" {
			t.Errorf("annotation meta.crossplane.io/%s is missing", k)
		}
	}
}

func crdsByName(t *testing.T, objs []kruntime.Object) map[string]*extv1.CustomResourceDefinition {
	t.Helper()
	m := map[string]*extv1.CustomResourceDefinition{}
	for _, o := range objs {
		crd, ok := o.(*extv1.CustomResourceDefinition)
		if !ok {
			t.Fatalf("object is a %T, not a CRD", o)
		}
		m[crd.GetName()] = crd
	}
	return m
}

// checkExamples checks that the examples layer holds every example of the
// package, except the ignored ones, and that Crossplane's examples parser
// accepts it.
func checkExamples(t *testing.T, img v1.Image, root string, p xpkg.Package) {
	t.Helper()
	got := annotatedLayer(t, img, "upbound", ".up/examples.yaml")
	if _, err := examples.New().Parse(t.Context(), io.NopCloser(bytes.NewReader(got))); err != nil {
		t.Errorf("Crossplane's examples parser rejects the examples: %v", err)
	}
	dir := filepath.Join(root, p.Examples)
	var included int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		ignored := false
		for _, pat := range p.Ignore {
			if ok, _ := filepath.Match(filepath.Join(dir, pat), path); ok {
				ignored = true
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch in := bytes.Contains(got, bytes.TrimSpace(b)); {
		case ignored && in:
			t.Errorf("examples include %s, which is ignored", rel)
		case !ignored && !in:
			t.Errorf("examples lack %s", rel)
		case in:
			included++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if included == 0 {
		t.Errorf("no example of %s is in the package", p.Examples)
	}
}

// checkRuntime checks the embedded runtime image: its config, its files, and
// that its entrypoint is a static binary for arch that reports the version
// (run when the test machine can run it).
func checkRuntime(t *testing.T, img v1.Image, p xpkg.Package, arch string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type platformUser struct {
		OS, Architecture, User string
		Entrypoint, Cmd        []string
	}
	want := platformUser{OS: "linux", Architecture: arch, User: "65532:65532", Entrypoint: []string{p.Entrypoint}}
	got := platformUser{OS: cf.OS, Architecture: cf.Architecture, User: cf.Config.User, Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runtime config: -want, +got:\n%s", diff)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   xpkg.Source,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.created":  "2025-11-21T10:00:00Z",
		"org.opencontainers.image.title":    p.Name,
	}
	for k, v := range wantLabels {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s: want %q, got %q", k, v, cf.Config.Labels[k])
		}
	}

	// The files a node unpacks, later layers winning.
	type file struct {
		hdr  *tar.Header
		data []byte
	}
	files := map[string]file{}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case strings.TrimPrefix(p.Entrypoint, "/"), "etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt":
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = file{hdr: h, data: b}
		}
	}
	bin, ok := files[strings.TrimPrefix(p.Entrypoint, "/")]
	if !ok {
		t.Fatalf("the entrypoint %s is not in the image", p.Entrypoint)
	}
	type owner struct {
		Mode     int64
		UID, GID int
	}
	if diff := cmp.Diff(owner{Mode: 0o755, UID: 0, GID: 0}, owner{Mode: bin.hdr.Mode, UID: bin.hdr.Uid, GID: bin.hdr.Gid}); diff != "" {
		t.Errorf("entrypoint mode and owner: -want, +got:\n%s", diff)
	}
	if !bytes.Contains(files["etc/passwd"].data, []byte("nonroot:x:65532:65532:")) || !bytes.Contains(files["etc/group"].data, []byte("nonroot:x:65532:")) {
		t.Error("/etc/passwd and /etc/group do not name user and group 65532")
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].data) {
		t.Error("/etc/ssl/certs/ca-certificates.crt holds no certificates")
	}

	ef, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("the entrypoint is not an ELF binary: %v", err)
	}
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if ef.Machine != wantMachine {
		t.Errorf("the entrypoint is for %s, want %s", ef.Machine, wantMachine)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Error("the entrypoint is dynamically linked; it must be static (CGO_ENABLED=0)")
		}
	}

	if runtime.GOOS != "linux" || runtime.GOARCH != arch {
		return
	}
	exe := filepath.Join(t.TempDir(), filepath.Base(p.Entrypoint))
	if err := os.WriteFile(exe, bin.data, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), exe, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v: %s", p.Entrypoint, err, out)
	}
	if diff := cmp.Diff(version, strings.TrimSpace(string(out))); diff != "" {
		t.Errorf("%s --version: -want, +got:\n%s", p.Entrypoint, diff)
	}
}
