package sign_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/widgetco/crossplane-widget/package/sign"
	"github.com/widgetco/crossplane-widget/test/lib/registry"
)

// signing is what each case of TestSignatures works with: a loopback
// registry, cosign, this project's key pair and another one.
type signing struct {
	t        *testing.T
	reg      *registry.Registry
	cosign   sign.Cosign
	key, pub string
	// foreign is the public half of a key pair that is not the project's.
	foreign string
}

func newSigning(t *testing.T) *signing {
	t.Helper()
	bin := os.Getenv("COSIGN_BIN")
	if bin == "" {
		t.Skip("needs cosign: bash hack/tools.sh cosign builds it, and eval \"$(bash hack/tools.sh env)\" names it in COSIGN_BIN")
	}
	dir := t.TempDir()
	reg, err := registry.Start("127.0.0.1:0", filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	cfg, err := reg.DockerConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &signing{t: t, reg: reg, cosign: sign.Cosign{Bin: bin, DockerConfig: dir, Password: "pw-" + rand.Text(), AllowHTTP: true}}
	ours, theirs := filepath.Join(dir, "ours"), filepath.Join(dir, "theirs")
	for _, d := range []string{ours, theirs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if s.key, s.pub, err = s.cosign.GenerateKeyPair(t.Context(), ours); err != nil {
		t.Fatal(err)
	}
	if _, s.foreign, err = s.cosign.GenerateKeyPair(t.Context(), theirs); err != nil {
		t.Fatal(err)
	}
	return s
}

// push pushes img as repo:tag and returns its digest reference.
func (s *signing) push(img v1.Image, repo, tag string) name.Digest {
	s.t.Helper()
	ref, err := name.NewTag(s.reg.Host+"/widgetco/"+repo+":"+tag, name.Insecure)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuthFromKeychain(s.reg.Keychain()), remote.WithContext(s.t.Context())); err != nil {
		s.t.Fatalf("cannot push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		s.t.Fatal(err)
	}
	return ref.Context().Digest(d.String())
}

func (s *signing) image() v1.Image {
	s.t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		s.t.Fatal(err)
	}
	return img
}

// sign signs ref as version of package repo, and attests an SBOM of it.
func (s *signing) sign(ref name.Digest, version string) {
	s.t.Helper()
	if err := s.cosign.Sign(s.t.Context(), s.key, ref, annotations(ref, version)); err != nil {
		s.t.Fatal(err)
	}
	if err := s.cosign.Attest(s.t.Context(), s.key, ref, "spdxjson", []byte(`{"spdxVersion":"SPDX-2.3","name":"`+ref.RepositoryStr()+`"}`)); err != nil {
		s.t.Fatal(err)
	}
}

func annotations(ref name.Digest, version string) map[string]string {
	return map[string]string{"package": ref.RepositoryStr(), "version": version}
}

// copyManifest copies the manifest tagged from to the tag to, in the same
// repository: what an attacker with push rights can do.
func (s *signing) copyManifest(repo name.Repository, from, to string) {
	s.t.Helper()
	opts := []remote.Option{remote.WithAuthFromKeychain(s.reg.Keychain()), remote.WithContext(s.t.Context())}
	d, err := remote.Get(repo.Tag(from), opts...)
	if err != nil {
		s.t.Fatalf("cannot read %s: %v", from, err)
	}
	img, err := d.Image()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(to), img, opts...); err != nil {
		s.t.Fatalf("cannot write %s: %v", to, err)
	}
}

// sigTag is the tag cosign keeps ref's signatures (suffix "sig") or
// attestations ("att") under.
func sigTag(ref name.Digest, suffix string) string {
	return strings.Replace(ref.DigestStr(), ":", "-", 1) + "." + suffix
}

// TestSignatures signs packages in a loopback registry as make publish does,
// and checks that verification accepts them and refuses each attack on
// them: an unsigned image, one changed after signing under the same tag, a
// signature stripped, another key, an older signed image under a newer tag,
// and an attestation copied from another image.
func TestSignatures(t *testing.T) {
	s := newSigning(t)

	signed := s.push(s.image(), "provider-widget", "v1.0.0")
	s.sign(signed, "v1.0.0")

	unsigned := s.push(s.image(), "function-widget", "v1.0.0")

	// Signed, then changed (a layer added) and pushed under the same tag.
	tampered := s.push(s.image(), "tampered", "v1.0.0")
	s.sign(tampered, "v1.0.0")
	base, err := remote.Image(tampered, remote.WithAuthFromKeychain(s.reg.Keychain()))
	if err != nil {
		t.Fatal(err)
	}
	extra, err := random.Layer(256, "application/vnd.oci.image.layer.v1.tar+gzip")
	if err != nil {
		t.Fatal(err)
	}
	changed, err := mutate.AppendLayers(base, extra)
	if err != nil {
		t.Fatal(err)
	}
	s.push(changed, "tampered", "v1.0.0")

	// Signed, then its signature deleted from the registry.
	stripped := s.push(s.image(), "stripped", "v1.0.0")
	s.sign(stripped, "v1.0.0")
	if err := remote.Delete(stripped.Context().Tag(sigTag(stripped, "sig")), remote.WithAuthFromKeychain(s.reg.Keychain())); err != nil {
		t.Fatal(err)
	}

	// An older signed release put under a newer release's tag.
	old := s.push(s.image(), "swapped", "v1.0.0")
	s.sign(old, "v1.0.0")
	s.push(mustImage(t, old, s), "swapped", "v1.1.0")

	// Signed by us, with another image's attestation copied onto it.
	other := s.push(s.image(), "copied", "v1.0.0")
	s.sign(other, "v1.0.0")
	victim := s.push(s.image(), "copied", "v2.0.0")
	if err := s.cosign.Sign(t.Context(), s.key, victim, annotations(victim, "v2.0.0")); err != nil {
		t.Fatal(err)
	}
	s.copyManifest(victim.Context(), sigTag(other, "att"), sigTag(victim, "att"))

	// Signed, then its signature and its attestations replaced by
	// garbage (an image of random layers) under their tags.
	garbled := s.push(s.image(), "garbled", "v1.0.0")
	s.sign(garbled, "v1.0.0")
	for _, suffix := range []string{"sig", "att"} {
		s.push(s.image(), "garbled", sigTag(garbled, suffix))
	}

	tag := func(d name.Digest, tag string) name.Reference { return d.Context().Tag(tag) }
	cases := map[string]struct {
		reason  string
		ref     name.Reference
		pub     string
		version string
		refused string // what the refusal says; empty when it verifies
	}{
		"Signed": {
			reason:  "A package signed with the project's key verifies, by its tag as core resolves it.",
			ref:     tag(signed, "v1.0.0"),
			version: "v1.0.0",
		},
		"Unsigned": {
			reason:  "A package never signed is refused.",
			ref:     tag(unsigned, "v1.0.0"),
			version: "v1.0.0",
			refused: "no signatures found",
		},
		"TamperedUnderTheSameTag": {
			reason:  "A package changed after signing (a layer added) and pushed under the same tag has a new digest that nothing signed.",
			ref:     tag(tampered, "v1.0.0"),
			version: "v1.0.0",
			refused: "no signatures found",
		},
		"SignatureStripped": {
			reason:  "A package whose signature was deleted from the registry is refused.",
			ref:     tag(stripped, "v1.0.0"),
			version: "v1.0.0",
			refused: "no signatures found",
		},
		"ForeignKey": {
			reason:  "A package signed with the project's key does not verify against another key.",
			ref:     tag(signed, "v1.0.0"),
			pub:     s.foreign,
			version: "v1.0.0",
			refused: "no matching signatures",
		},
		"MalformedSignature": {
			reason:  "A signature replaced by garbage is refused, not a crash.",
			ref:     tag(garbled, "v1.0.0"),
			version: "v1.0.0",
			refused: "no matching signatures",
		},
		"OlderReleaseUnderANewerTag": {
			reason:  "A signed v1.0.0 put under the tag v1.1.0 is refused when the version it was signed as is required.",
			ref:     tag(old, "v1.1.0"),
			version: "v1.1.0",
			refused: "no matching signatures",
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			pub := s.pub
			if tc.pub != "" {
				pub = tc.pub
			}
			ref := tc.ref.(name.Tag)
			n, err := s.cosign.Verify(t.Context(), pub, ref, map[string]string{"package": ref.RepositoryStr(), "version": tc.version})
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("%s\nVerify: %v", tc.reason, err)
			case tc.refused == "" && n != 1:
				t.Errorf("%s\nVerify: %d signatures matched, want 1", tc.reason, n)
			case tc.refused != "" && err == nil:
				t.Errorf("%s\nVerify: accepted, want refused (%q)", tc.reason, tc.refused)
			case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
				t.Errorf("%s\nVerify: refused with %q, want %q", tc.reason, err, tc.refused)
			case err != nil && strings.Contains(err.Error(), s.cosign.Password):
				t.Errorf("%s\nthe key's password is in the error: %v", tc.reason, err)
			}
			if err != nil {
				t.Logf("refused: %v", err)
			}
		})
	}

	t.Run("SwappedTagWithoutTheVersion", func(t *testing.T) {
		// Why Verify takes the annotations: the signature alone is
		// valid for the older image wherever it is tagged, and core's
		// ImageConfig checks only that (docs/install.md).
		if _, err := s.cosign.Verify(t.Context(), s.pub, old.Context().Tag("v1.1.0"), nil); err != nil {
			t.Errorf("the older image's own signature should verify without the version; got %v", err)
		}
	})
	t.Run("Attestation", func(t *testing.T) {
		sts, err := s.cosign.VerifyAttestations(t.Context(), s.pub, signed, "spdxjson")
		if err != nil {
			t.Fatal(err)
		}
		if len(sts) != 1 || sts[0].PredicateType != "https://spdx.dev/Document" {
			t.Errorf("got %d statements (%+v), want one SPDX document about %s", len(sts), sts, signed)
		}
	})
	t.Run("AttestationOfAnotherImage", func(t *testing.T) {
		_, err := s.cosign.VerifyAttestations(t.Context(), s.pub, victim, "spdxjson")
		if err == nil {
			t.Fatal("an attestation copied from another image verified")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("MalformedAttestation", func(t *testing.T) {
		_, err := s.cosign.VerifyAttestations(t.Context(), s.pub, garbled, "spdxjson")
		if err == nil {
			t.Fatal("garbage under the attestation tag verified")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("AttestationForeignKey", func(t *testing.T) {
		if _, err := s.cosign.VerifyAttestations(t.Context(), s.foreign, signed, "spdxjson"); err == nil {
			t.Fatal("an attestation verified against another key")
		}
	})
	t.Run("MalformedKey", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.pub")
		if err := os.WriteFile(bad, []byte("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.cosign.Verify(t.Context(), bad, tag(signed, "v1.0.0"), nil)
		if err == nil || !strings.Contains(err.Error(), "bad.pub") {
			t.Fatalf("Verify with a malformed key: got %v, want an error naming the key", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("WrongPassword", func(t *testing.T) {
		c := s.cosign
		c.Password = "pw-wrong-" + rand.Text()
		err := c.Sign(t.Context(), s.key, unsigned, nil)
		if err == nil {
			t.Fatal("signed with the wrong password")
		}
		if strings.Contains(err.Error(), c.Password) || strings.Contains(err.Error(), s.cosign.Password) {
			t.Errorf("a password is in the error: %v", err)
		}
		t.Logf("refused: %v", err)
	})
}

// mustImage reads the image ref from the registry.
func mustImage(t *testing.T, ref name.Digest, s *signing) v1.Image {
	t.Helper()
	img, err := remote.Image(ref, remote.WithAuthFromKeychain(s.reg.Keychain()))
	if err != nil {
		t.Fatal(err)
	}
	return img
}
