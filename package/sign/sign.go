// Package sign signs the packages' images with cosign, attaches their SBOM
// and build provenance as attestations, and verifies both offline.
//
// Signatures and attestations are written the way Crossplane core's
// ImageConfig verification (spec.verification.cosign) reads them: as
// cosign's tags beside the image (sha256-<digest>.sig and .att), not as OCI
// referrers or Sigstore bundles, which core v2.4 does not look for. Nothing
// is uploaded to a transparency log: this project builds and tests offline,
// and a platform with its own Sigstore services can sign again with them
// (docs/install.md). Verification here therefore checks the signature and
// the attestation against a public key and ignores the log.
//
// The package runs the cosign CLI (hack/tools.sh builds it, pinned) rather
// than linking cosign's library: its dependency graph would otherwise enter
// the module the provider and the function are built from. A private key's
// password travels in cosign's environment (COSIGN_PASSWORD), never on a
// command line, and no error or log line repeats it.
package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Cosign runs the cosign CLI.
type Cosign struct {
	// Bin is the cosign binary (bash hack/tools.sh path cosign).
	Bin string
	// DockerConfig is a directory with a config.json holding the
	// registry's credentials; empty for the user's own (~/.docker).
	DockerConfig string
	// Password unlocks the private key; empty for an unencrypted one.
	Password string
	// AllowHTTP lets cosign talk plain HTTP to the registry, as to a
	// registry on loopback.
	AllowHTTP bool
}

// maxOutput bounds how much of cosign's output an error carries.
const maxOutput = 2 << 10

// GenerateKeyPair writes a new key pair, cosign.key (encrypted with the
// password) and cosign.pub, to dir and returns their paths.
func (c Cosign) GenerateKeyPair(ctx context.Context, dir string) (key, pub string, err error) {
	if _, err := c.run(ctx, dir, "generate-key-pair"); err != nil {
		return "", "", errors.Wrap(err, "cannot generate a key pair")
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub"), nil
}

// Sign signs the image (or image index, with every image in it) ref with
// key: a key file, or a KMS URI cosign knows (awskms://, gcpkms://,
// azurekms://, hashivault://). The annotations become part of what is
// signed, so that Verify can require them: the package's name and version
// tell a signed image from another signed image put under its tag.
func (c Cosign) Sign(ctx context.Context, key string, ref name.Digest, annotations map[string]string) error {
	args := []string{"sign", "--key", key, "--yes", "--recursive"}
	args = append(args, offline...)
	args = append(args, c.registryFlags()...)
	args = append(args, annotationFlags(annotations)...)
	if _, err := c.run(ctx, "", append(args, ref.String())...); err != nil {
		return errors.Wrapf(err, "cannot sign %s", ref)
	}
	return nil
}

// Attest attaches predicate, of predicateType (a cosign --type: spdxjson,
// slsaprovenance1), to the image ref as an in-toto statement signed with
// key, whose subject is ref's digest.
func (c Cosign) Attest(ctx context.Context, key string, ref name.Digest, predicateType string, predicate []byte) error {
	f, err := os.CreateTemp("", "predicate-*.json")
	if err != nil {
		return errors.Wrap(err, "cannot write the predicate")
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(predicate); err != nil {
		_ = f.Close()
		return errors.Wrap(err, "cannot write the predicate")
	}
	if err := f.Close(); err != nil {
		return errors.Wrap(err, "cannot write the predicate")
	}
	args := []string{"attest", "--key", key, "--yes", "--type", predicateType, "--predicate", f.Name()}
	args = append(args, offline...)
	args = append(args, c.registryFlags()...)
	if _, err := c.run(ctx, "", append(args, ref.String())...); err != nil {
		return errors.Wrapf(err, "cannot attest %s (%s)", ref, predicateType)
	}
	return nil
}

// Verify checks that ref (a tag or a digest) is signed with the key whose
// public half is pub, with every one of annotations, and returns how many
// signatures matched. It ignores the transparency log: see the package
// comment.
func (c Cosign) Verify(ctx context.Context, pub string, ref name.Reference, annotations map[string]string) (int, error) {
	args := []string{"verify", "--key", pub, "--insecure-ignore-tlog", "--output", "json"}
	args = append(args, c.registryFlags()...)
	args = append(args, annotationFlags(annotations)...)
	out, err := c.run(ctx, "", append(args, ref.String())...)
	if err != nil {
		return 0, errors.Wrapf(err, "cannot verify %s with %s", ref, filepath.Base(pub))
	}
	var sigs []json.RawMessage
	if err := json.Unmarshal(lastLine(out), &sigs); err != nil {
		return 0, errors.Wrapf(err, "cannot read cosign's verification of %s", ref)
	}
	return len(sigs), nil
}

// A Statement is an in-toto statement cosign verified: what an attestation
// says, and of which digests.
type Statement struct {
	PredicateType string          `json:"predicateType"`
	Subject       []Subject       `json:"subject"`
	Predicate     json.RawMessage `json:"predicate"`
}

// A Subject is what a statement is about.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// VerifyAttestations checks the attestations of predicateType (a cosign
// --type) on ref against the key whose public half is pub, and returns
// their statements. cosign refuses an attestation whose subject is not
// ref's digest; each statement is checked again here, so that a copied
// attestation cannot pass.
func (c Cosign) VerifyAttestations(ctx context.Context, pub string, ref name.Reference, predicateType string) ([]Statement, error) {
	args := []string{"verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--type", predicateType}
	args = append(args, c.registryFlags()...)
	out, err := c.run(ctx, "", append(args, ref.String())...)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot verify the %s attestations of %s with %s", predicateType, ref, filepath.Base(pub))
	}
	var digest string
	if d, ok := ref.(name.Digest); ok {
		digest = d.DigestStr()
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	sts := make([]Statement, 0, len(lines))
	for _, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 || l[0] != '{' {
			continue
		}
		st, err := statementOf(l)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read an attestation of %s", ref)
		}
		if digest != "" && !st.about(digest) {
			return nil, errors.Errorf("an attestation on %s is about another image (%v)", ref, st.Subject)
		}
		sts = append(sts, st)
	}
	if len(sts) == 0 {
		return nil, errors.Errorf("cosign verified no %s attestation of %s", predicateType, ref)
	}
	return sts, nil
}

// statementOf decodes the in-toto statement of a DSSE envelope cosign
// printed.
func statementOf(envelope []byte) (Statement, error) {
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return Statement{}, errors.Wrap(err, "not a DSSE envelope")
	}
	p, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return Statement{}, errors.Wrap(err, "the envelope's payload is not base64")
	}
	var st Statement
	if err := json.Unmarshal(p, &st); err != nil {
		return Statement{}, errors.Wrap(err, "the envelope's payload is not an in-toto statement")
	}
	return st, nil
}

// about reports whether the statement's subject is the digest d
// ("sha256:<hex>").
func (st Statement) about(d string) bool {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok {
		return false
	}
	return slices.ContainsFunc(st.Subject, func(s Subject) bool { return s.Digest[alg] == hex })
}

// offline are the flags that keep cosign from the public Sigstore services
// and write what core reads: the .sig and .att tags, no transparency log
// entry, no signing config fetched from Sigstore's TUF repository.
var offline = []string{"--tlog-upload=false", "--new-bundle-format=false", "--use-signing-config=false"}

func (c Cosign) registryFlags() []string {
	if c.AllowHTTP {
		return []string{"--allow-http-registry", "--allow-insecure-registry"}
	}
	return nil
}

// annotationFlags are -a flags of annotations, in a stable order.
func annotationFlags(annotations map[string]string) []string {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, "-a", k+"="+annotations[k])
	}
	return out
}

// run runs cosign with args in dir ("" for the current one) and returns
// its standard output; an error carries the end of its output.
func (c Cosign) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	if c.Bin == "" {
		return nil, errors.New("cosign is required: bash hack/tools.sh cosign builds it, and COSIGN_BIN (bash hack/tools.sh env) names it")
	}
	//nolint:gosec // runs the pinned cosign on this build's own images
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Dir = dir
	cmd.Env = c.env()
	stdout, stderr := &capped{max: maxStdout}, &capped{max: maxStdout}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	err := cmd.Run()
	switch {
	case stdout.over:
		// What cosign prints is what the registry holds: a hostile
		// attestation must not cost more than a bound.
		return nil, errors.Errorf("cosign %s printed more than %d MiB: the registry holds signatures or attestations far larger than a package's; refused", args[0], maxStdout>>20)
	case err != nil:
		return stdout.Bytes(), errors.Errorf("cosign %s: %s (%v)", args[0], c.redact(reason(stderr.String())), err)
	}
	return stdout.Bytes(), nil
}

// maxStdout bounds what is kept of cosign's output: a package's signatures
// and attestations are a few tens of KiB.
const maxStdout = 32 << 20

// capped keeps at most max bytes written to it and notes when more came.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); len(p) > room {
		c.over = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

// env is cosign's environment: this process's, without a password or
// registry configuration of its own, and with this Cosign's.
func (c Cosign) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "COSIGN_PASSWORD=") || (c.DockerConfig != "" && strings.HasPrefix(kv, "DOCKER_CONFIG="))
	})
	// Set even when empty: cosign otherwise asks on a terminal.
	env = append(env, "COSIGN_PASSWORD="+c.Password)
	if c.DockerConfig != "" {
		env = append(env, "DOCKER_CONFIG="+c.DockerConfig)
	}
	// Never reach for Sigstore's public TUF repository.
	return append(env, "TUF_ROOT="+filepath.Join(os.TempDir(), "widget-cosign-no-tuf"))
}

// redact removes the password from s, should cosign ever print it.
func (c Cosign) redact(s string) string {
	if c.Password == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Password, "[redacted]")
}

// reason is why cosign failed, from what it printed: its last "Error: "
// line (cosign repeats it, and warns of the skipped transparency log,
// which this package skips on purpose), or else the end of its output.
func reason(out string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if r, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "Error: "); ok {
			return tail(r)
		}
	}
	return tail(out)
}

// tail is the end of s, at most maxOutput bytes, on one line.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxOutput {
		s = "..." + s[len(s)-maxOutput:]
	}
	return strings.Join(strings.Fields(s), " ")
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) []byte {
	ls := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return ls[len(ls)-1]
}
