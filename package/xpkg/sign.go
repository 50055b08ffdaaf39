package xpkg

import (
	"context"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/package/attest"
	"github.com/widgetco/crossplane-widget/package/sign"
)

// BuilderID is the builder the provenance of published packages names: the
// Makefile target that publishes them.
const BuilderID = Source + "/Makefile#publish"

// A Signer signs published packages.
type Signer struct {
	// Cosign runs cosign, with the registry's credentials and the key's
	// password.
	Cosign sign.Cosign
	// Key is the private key: a file, or a KMS URI cosign knows.
	Key string
	// Keychain reads the registry's credentials, to resolve a tag to
	// the digest that is signed. Default: the user's (~/.docker).
	Keychain authn.Keychain
}

// SignatureAnnotations are what a package's signature carries besides the
// digest: the package and version it was published as. A verifier that
// requires them refuses a signed older release put under a newer tag.
func SignatureAnnotations(pkg, version string) map[string]string {
	return map[string]string{"package": pkg, "version": version}
}

// Sign signs the package published at ref (a tag Publish or
// PublishConfiguration returned): the image index or image the tag points
// at now, and every image in an index. It attaches an SPDX SBOM of the Go
// binaries of archs (none for a Configuration) and the build's SLSA
// provenance, and returns the digest it signed.
func (b *Builder) Sign(ctx context.Context, s Signer, pkg string, archs []string, registry, ref string) (name.Digest, error) {
	t := time.Now()
	tag, err := name.NewTag(ref)
	if err != nil {
		return name.Digest{}, errors.Wrapf(err, "cannot sign %q", ref)
	}
	kc := s.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	desc, err := remote.Head(tag, remote.WithAuthFromKeychain(kc), remote.WithContext(ctx))
	if err != nil {
		return name.Digest{}, errors.Wrapf(err, "cannot resolve %s to the digest to sign", ref)
	}
	d := tag.Context().Digest(desc.Digest.String())

	var bins []attest.Binary
	if p, err := Lookup(pkg); err == nil {
		for _, arch := range archs {
			bins = append(bins, attest.Binary{Path: p.Entrypoint, File: b.Binary(p, arch)})
		}
	}
	sbom, err := attest.SBOM(attest.SBOMInput{Name: pkg, Version: b.Version, Created: b.Created, Binaries: bins})
	if err != nil {
		return name.Digest{}, errors.Wrapf(err, "cannot write the SBOM of %s", ref)
	}
	prov, err := attest.Provenance(attest.ProvenanceInput{
		Package: pkg, Version: b.Version,
		Repository: Source, Commit: b.Revision, Dirty: Dirty(b.Version),
		Architectures: archs, Registry: registry, Builder: BuilderID,
		Started: b.Created, Finished: b.Created,
		Binaries: bins,
	})
	if err != nil {
		return name.Digest{}, errors.Wrapf(err, "cannot write the provenance of %s", ref)
	}

	if err := s.Cosign.Sign(ctx, s.Key, d, SignatureAnnotations(pkg, b.Version)); err != nil {
		return name.Digest{}, err
	}
	if err := s.Cosign.Attest(ctx, s.Key, d, attest.CosignTypeSPDX, sbom); err != nil {
		return name.Digest{}, err
	}
	if err := s.Cosign.Attest(ctx, s.Key, d, attest.CosignTypeSLSAProvenanceV1, prov); err != nil {
		return name.Digest{}, err
	}
	b.logf("signed %s with its SBOM and provenance in %s", d, since(t))
	return d, nil
}
