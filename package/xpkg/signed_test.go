package xpkg_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/widgetco/crossplane-widget/package/attest"
	"github.com/widgetco/crossplane-widget/package/sign"
	"github.com/widgetco/crossplane-widget/package/xpkg"
)

// checkSigned checks that publish signed each package it pushed to host's
// two registries (the index and each image in it) with the package and
// version, and attested a provenance and an SBOM, the same for both builds
// of the commit: anyone who rebuilds it gets the same digests and SBOM.
func checkSigned(t *testing.T, c sign.Cosign, pub, host string) {
	t.Helper()
	for _, p := range []string{xpkg.Provider.Name, xpkg.Function.Name, xpkg.Configuration.Name} {
		predicates := map[string][]string{}
		for _, org := range []string{"widgetco", "rebuilt"} {
			ref := tag(t, host+"/"+org+"/"+p+":"+version)
			refs := []name.Reference{ref}
			if p != xpkg.Configuration.Name {
				im, err := pullIndex(t, ref.String()).IndexManifest()
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range im.Manifests {
					refs = append(refs, ref.Context().Digest(m.Digest.String()))
				}
			}
			for _, r := range refs {
				if _, err := c.Verify(t.Context(), pub, r, xpkg.SignatureAnnotations(p, version)); err != nil {
					t.Errorf("publish did not sign %s: %v", r, err)
				}
			}
			desc, err := remote.Head(ref)
			if err != nil {
				t.Fatal(err)
			}
			d := ref.Context().Digest(desc.Digest.String())
			for _, typ := range []string{attest.CosignTypeSPDX, attest.CosignTypeSLSAProvenanceV1} {
				sts, err := c.VerifyAttestations(t.Context(), pub, d, typ)
				if err != nil {
					t.Errorf("publish did not attest %s: %v", d, err)
					continue
				}
				if err := attest.Check(typ, sts[0].Predicate); err != nil {
					t.Errorf("%s of %s: %v", typ, d, err)
				}
				predicates[typ] = append(predicates[typ], string(sts[0].Predicate))
			}
		}
		// The provenance names the registry, which differs.
		if ps := predicates[attest.CosignTypeSPDX]; len(ps) == 2 && ps[0] != ps[1] {
			t.Errorf("the SBOM of %s differs between two builds of one commit:\n%s", p, cmp.Diff(ps[0], ps[1]))
		}
	}
}
