//go:build linux

package e2e_test

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/package/attest"
	"github.com/widgetco/crossplane-widget/package/sign"
	"github.com/widgetco/crossplane-widget/package/xpkg"
	"github.com/widgetco/crossplane-widget/test/lib/leaks"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// newSigner makes a key pair for the run in dir and a Signer that signs
// with it, as make publish signs with COSIGN_KEY, into the cluster's
// registry. It returns the Signer and the public key's path.
func newSigner(ctx context.Context, cosign, dir string) (*platform.Signer, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", errors.Wrap(err, "cannot make the signing directory")
	}
	cfg, err := suite.c.Registry.DockerConfigJSON()
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		return nil, "", errors.Wrap(err, "cannot write the registry's credentials for cosign")
	}
	c := sign.Cosign{Bin: cosign, DockerConfig: dir, Password: "e2e-" + rand.Text(), AllowHTTP: true}
	key, pub, err := c.GenerateKeyPair(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	commit, err := xpkg.FromGit(ctx, suite.root)
	if err != nil {
		return nil, "", err
	}
	return &platform.Signer{Signer: xpkg.Signer{Cosign: c, Key: key, Keychain: suite.c.Registry.Keychain()}, Commit: commit}, pub, nil
}

// TestInstalledPackagesAreSigned checks that what Crossplane's package
// manager installed and what kubelet runs is what the suite signed, as
// make publish signs: the image digest of each running provider and
// function container, and the Configuration revision's package, verify
// against the run's public key with the package and version they were
// published as; their SBOM names the very binary in the image, and their
// provenance the commit built. Crossplane core v2.4.2 cannot verify them
// itself offline (docs/install.md#verifying-packages): this is the check a
// platform without a transparency log runs.
func TestInstalledPackagesAreSigned(t *testing.T) {
	s := newScenario(t, true)
	for _, tc := range []struct {
		pkg   string
		label string
		name  string
		entry string
	}{
		{"provider-widget", "pkg.crossplane.io/provider", platform.ProviderName, xpkg.Provider.Entrypoint},
		{"function-widget", "pkg.crossplane.io/function", platform.FunctionName, xpkg.Function.Entrypoint},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			digests := runningImages(t, s.ctx, tc.label, tc.name)
			for d, version := range digests {
				n, err := suite.signer.Cosign.Verify(s.ctx, suite.pub, d, xpkg.SignatureAnnotations(tc.pkg, version))
				if err != nil {
					t.Fatalf("the running image is not what the suite signed: %v", err)
				}
				t.Logf("%s (%s) runs %s, signed (%d signature)", tc.pkg, version, d.DigestStr(), n)
				checkSBOM(t, s.ctx, d, tc.entry)
				checkProvenance(t, s.ctx, d)
			}
		})
	}
	t.Run(xpkg.Configuration.Name, func(t *testing.T) {
		revs := &pkgv1.ConfigurationRevisionList{}
		if err := suite.c.Client().List(s.ctx, revs, client.MatchingLabels{"pkg.crossplane.io/package": "configuration-widget"}); err != nil {
			t.Fatal(err)
		}
		for _, r := range revs.Items {
			if r.Spec.DesiredState != pkgv1.PackageRevisionActive {
				continue
			}
			tag, err := name.NewTag(r.Spec.Package)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Head(tag, remote.WithAuthFromKeychain(suite.c.Registry.Keychain()), remote.WithContext(s.ctx))
			if err != nil {
				t.Fatal(err)
			}
			if !revisionOf(r.GetName(), desc.Digest.Hex, cfgGeneration(t, s.ctx)) {
				t.Fatalf("revision %s is not of %s (%s), which the tag holds now", r.GetName(), tag, desc.Digest)
			}
			d := tag.Context().Digest(desc.Digest.String())
			if _, err := suite.signer.Cosign.Verify(s.ctx, suite.pub, d, xpkg.SignatureAnnotations(xpkg.Configuration.Name, tag.TagStr())); err != nil {
				t.Fatalf("the installed Configuration is not what the suite signed: %v", err)
			}
			checkProvenance(t, s.ctx, d)
			t.Logf("configuration-widget revision %s is %s, signed", r.GetName(), d.DigestStr())
			return
		}
		t.Fatal("no active revision of configuration-widget")
	})
	t.Run("VerificationExample", func(t *testing.T) {
		// What a platform with a transparency log applies
		// (docs/install.md#verify-packages): valid for the API server,
		// checked without creating it (core here runs without
		// --enable-signature-verification, which needs Sigstore).
		objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "registry", "verification.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := suite.kube.Create(s.ctx, o, client.DryRunAll); err != nil {
				t.Errorf("examples/registry/verification.yaml: %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
			}
		}
	})
}

// revisionOf reports whether Crossplane named the package revision name
// after the package digest digestHex, at one of the package's generations up to
// gen: core v2.4.2 names a revision <package>-<the first 12 hex digits of
// SHA-256("<digest>|<generation>")> (packageRevisionID in
// internal/controller/pkg/manager/reconciler.go).
func revisionOf(name, digestHex string, gen int64) bool {
	for g := int64(1); g <= gen; g++ {
		h := sha256.Sum256([]byte(digestHex + "|" + strconv.FormatInt(g, 10)))
		if strings.HasSuffix(name, "-"+hex.EncodeToString(h[:])[:12]) {
			return true
		}
	}
	return false
}

// cfgGeneration is configuration-widget's generation.
func cfgGeneration(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	c := &pkgv1.Configuration{}
	if err := suite.c.Client().Get(ctx, client.ObjectKey{Name: platform.ConfigurationName}, c); err != nil {
		t.Fatal(err)
	}
	return c.GetGeneration()
}

// runningImages returns the image digests the running containers of the
// package's active revision run, with the version (the tag) each was
// installed as.
func runningImages(t *testing.T, ctx context.Context, label, pkg string) map[name.Digest]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := suite.kube.List(ctx, pods, client.InNamespace(suite.c.Namespace()), client.MatchingLabels{label: pkg}); err != nil {
		t.Fatal(err)
	}
	out := map[name.Digest]string{}
	for _, p := range pods.Items {
		image := map[string]string{}
		for _, c := range p.Spec.Containers {
			image[c.Name] = c.Image
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != "package-runtime" || cs.State.Running == nil {
				continue
			}
			// kubelet reports the repository digest containerd pulled.
			d, err := name.NewDigest(strings.TrimPrefix(cs.ImageID, "docker-pullable://"))
			if err != nil {
				t.Fatalf("pod %s runs %q, not an image digest: %v", p.GetName(), cs.ImageID, err)
			}
			tag, err := name.NewTag(image[cs.Name])
			if err != nil {
				t.Fatalf("pod %s runs %q, not a tag: %v", p.GetName(), image[cs.Name], err)
			}
			out[d] = tag.TagStr()
		}
	}
	if len(out) == 0 {
		t.Fatalf("no running package-runtime container of %s", pkg)
	}
	return out
}

// checkSBOM checks the SBOM attested on d: signed with the run's key, and
// naming the binary at entry in the image with its SHA-256.
func checkSBOM(t *testing.T, ctx context.Context, d name.Digest, entry string) {
	t.Helper()
	sts, err := suite.signer.Cosign.VerifyAttestations(ctx, suite.pub, d, attest.CosignTypeSPDX)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files []struct {
			FileName  string `json:"fileName"`
			Checksums []struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"checksumValue"`
			} `json:"checksums"`
		} `json:"files"`
	}
	if err := attest.Check(attest.PredicateSPDX, sts[0].Predicate); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sts[0].Predicate, &doc); err != nil {
		t.Fatal(err)
	}
	want := binarySHA256(t, ctx, d, entry)
	for _, f := range doc.Files {
		for _, c := range f.Checksums {
			if strings.TrimPrefix(f.FileName, ".") == entry && c.Algorithm == "SHA256" && c.Value == want {
				return
			}
		}
	}
	t.Errorf("the SBOM of %s does not name %s with the SHA-256 of the binary in the image (%s): %+v", d.DigestStr(), entry, want, doc.Files)
}

// checkProvenance checks the provenance attested on d: signed with the run's
// key, valid, and of the commit the suite built.
func checkProvenance(t *testing.T, ctx context.Context, d name.Digest) {
	t.Helper()
	sts, err := suite.signer.Cosign.VerifyAttestations(ctx, suite.pub, d, attest.CosignTypeSLSAProvenanceV1)
	if err != nil {
		t.Fatal(err)
	}
	if err := attest.Check(attest.PredicateSLSAProvenanceV1, sts[0].Predicate); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sts[0].Predicate), suite.signer.Commit.Revision) {
		t.Errorf("the provenance of %s does not name commit %s", d.DigestStr(), suite.signer.Commit.Revision)
	}
}

// binarySHA256 is the SHA-256 of the file at entry in the image d.
func binarySHA256(t *testing.T, ctx context.Context, d name.Digest, entry string) string {
	t.Helper()
	img, err := remote.Image(d, remote.WithAuthFromKeychain(suite.c.Registry.Keychain()), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := fileSHA256(img, strings.TrimPrefix(entry, "/"))
	if err != nil {
		t.Fatalf("%s: %v", d.DigestStr(), err)
	}
	return sum
}

func fileSHA256(img v1.Image, path string) (string, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", errors.Errorf("no %s in the image", path)
		}
		if err != nil {
			return "", errors.Wrap(err, "cannot read the image's files")
		}
		if strings.TrimPrefix(h.Name, "./") != path {
			continue
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			return "", errors.Wrapf(err, "cannot read %s", path)
		}
		return hex.EncodeToString(sum.Sum(nil)), nil
	}
}

// signingCanaries are the package signing key's password and a line of its
// encrypted private key, which must appear in no log or object.
func signingCanaries() []leaks.Canary {
	if suite.signer == nil {
		return nil
	}
	out := []leaks.Canary{{Kind: "signing key password", Value: suite.signer.Cosign.Password}}
	b, err := os.ReadFile(suite.signer.Key)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) >= 40 && !strings.HasPrefix(l, "-----") {
			return append(out, leaks.Canary{Kind: "signing private key", Value: l})
		}
	}
	return out
}
