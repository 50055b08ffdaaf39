// Package attest writes the predicates of the attestations that are attached
// to each published package image: an SPDX 2.3 SBOM of the Go binaries in
// the image (SBOM) and an SLSA Provenance v1 of the build (Provenance). cosign
// wraps each predicate in an in-toto Statement whose subject is the image
// digest, as in
//
//	cosign attest --predicate sbom.json --type spdxjson IMAGE@DIGEST
//	cosign attest --predicate provenance.json --type slsaprovenance1 IMAGE@DIGEST
//
// so this package never sees the digest and writes no Statement.
//
// Both predicates are reproducible, like the images they describe: the same
// inputs give the same bytes. Nothing reads the clock, the host or the
// environment; times are the caller's (the commit time), lists are sorted and
// identifiers are derived from names and digests. Two builds of one commit
// therefore attest identical predicates, and a rebuild can be checked against
// a published attestation byte for byte.
//
// What is known about a binary comes from the build information the Go
// linker embeds in it (debug/buildinfo): its main module, dependency modules,
// toolchain and build settings. With -trimpath Go leaves -ldflags out of that
// information (it may hold local paths), so the version stamping shows up
// only as the package version the caller passes.
//
// The predicates are built from small hand-written structs rather than an
// SPDX or in-toto library. The official Go libraries (spdx/tools-golang,
// in-toto/attestation's Go bindings) would bring readers for formats we do
// not write, or protobuf-generated types, into the go.mod that the provider
// and function images share, for two JSON shapes that fit in a few dozen
// lines.
package attest

import (
	"crypto/sha1" //nolint:gosec // SPDX 2.3 requires SHA1 file checksums; SHA256 is recorded beside it.
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Predicate types, as the predicateType of the in-toto Statement.
const (
	PredicateSPDX             = "https://spdx.dev/Document"
	PredicateSLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
)

// cosign's names for the predicate types, as its --type flag takes them.
const (
	CosignTypeSPDX             = "spdxjson"
	CosignTypeSLSAProvenanceV1 = "slsaprovenance1"
)

// MaxPredicateSize is the largest predicate Check reads. Ours are a few tens
// of KiB; the bound keeps a hostile attestation from costing more than a
// bounded amount of memory.
const MaxPredicateSize = 16 << 20

// A Binary is a Go binary in a package image.
type Binary struct {
	// Path is where the binary is in the image, e.g.
	// "/usr/local/bin/provider". It must be absolute.
	Path string
	// File is the binary on disk.
	File string
}

// binary is what the predicates say about a Binary: its build information
// and digests.
type binary struct {
	Binary
	info   *debug.BuildInfo
	sha1   string
	sha256 string
}

// platform is the binary's GOOS/GOARCH as Go recorded them, e.g.
// "linux/amd64".
func (b binary) platform() string {
	return b.setting("GOOS") + "/" + b.setting("GOARCH")
}

// setting is the value of the build setting key, or "" when Go did not
// record it.
func (b binary) setting(key string) string {
	for _, s := range b.info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// readBinaries reads bs, sorted by path and platform. A path may appear once
// per platform: an image has one file at a path, but the caller may describe
// the images of several architectures at once.
func readBinaries(bs []Binary) ([]binary, error) {
	out := make([]binary, 0, len(bs))
	seen := map[string]string{}
	for _, b := range bs {
		rb, err := readBinary(b)
		if err != nil {
			return nil, err
		}
		k := rb.Path + " " + rb.platform()
		if f, ok := seen[k]; ok {
			return nil, errors.Errorf("binaries %s and %s are both at %s for %s: pass each binary of an image once", f, b.File, rb.Path, rb.platform())
		}
		seen[k] = b.File
		out = append(out, rb)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].platform() < out[j].platform()
	})
	return out, nil
}

// readBinary reads b's Go build information and digests from one open file,
// so both describe the same bytes.
func readBinary(b Binary) (binary, error) {
	if b.File == "" {
		return binary{}, errors.Errorf("binary at %q has no file: pass the binary on disk as File", b.Path)
	}
	if !path.IsAbs(b.Path) {
		return binary{}, errors.Errorf("binary %s has path %q in the image, which is not absolute: pass where it is in the image, e.g. /usr/local/bin/provider", b.File, b.Path)
	}
	f, err := os.Open(b.File)
	if err != nil {
		return binary{}, errors.Wrap(err, "cannot open binary")
	}
	defer f.Close() //nolint:errcheck // read only: closing cannot lose data.

	info, err := buildinfo.Read(f)
	if err != nil {
		return binary{}, errors.Wrapf(err, "cannot read Go build information from %s (is it a Go binary?)", b.File)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return binary{}, errors.Wrapf(err, "cannot rewind %s", b.File)
	}
	h1, h256 := sha1.New(), sha256.New() //nolint:gosec // see the import.
	if _, err := io.Copy(io.MultiWriter(h1, h256), f); err != nil {
		return binary{}, errors.Wrapf(err, "cannot hash %s", b.File)
	}
	return binary{
		Binary: Binary{Path: path.Clean(b.Path), File: b.File},
		info:   info,
		sha1:   hex.EncodeToString(h1.Sum(nil)),
		sha256: hex.EncodeToString(h256.Sum(nil)),
	}, nil
}

// module returns the module that was built in place of m: m's replacement
// when there is one, m otherwise. A replacement by a local directory has no
// version and its path is a directory, not a module path, so m's path is
// kept and the version dropped: the code is not that of any published
// version of m.
func module(m *debug.Module) (modPath, version string) {
	if m.Replace == nil {
		return m.Path, m.Version
	}
	if m.Replace.Version == "" {
		return m.Path, ""
	}
	return m.Replace.Path, m.Replace.Version
}

// goVersion is the toolchain version without the experiments Go appends,
// e.g. "go1.26.8" for "go1.26.8 X:jsonv2".
func goVersion(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// purl is the package URL of the Go module p at version v. The purl spec's
// golang type lowercases namespace and name (Go module paths that differ
// only in case are served as different modules, but scanners match these
// case-insensitively). v is omitted when unknown.
func purl(p, v string) string {
	segs := strings.Split(strings.ToLower(p), "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	u := "pkg:golang/" + strings.Join(segs, "/")
	if v != "" {
		u += "@" + purlEscape(v)
	}
	return u
}

// stdlibPURL is the package URL of the Go standard library compiled into a
// binary, as Syft writes it and vulnerability scanners match it:
// pkg:golang/stdlib with the version without its "go" prefix. It is "" when v is not a release, e.g. a
// development toolchain.
func stdlibPURL(v string) string {
	n, ok := strings.CutPrefix(goVersion(v), "go")
	if !ok || n == "" || n[0] < '0' || n[0] > '9' {
		return ""
	}
	return purl("stdlib", n)
}

// purlEscape percent-encodes s except for RFC 3986's unreserved characters,
// so that '+' in "+incompatible" versions and '@' never reach a purl raw.
func purlEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

// marshal encodes v as indented JSON. encoding/json sorts map keys, so equal
// values give equal bytes. HTML escaping is off: the predicates are read by
// tools, not browsers, and "-ldflags" or a URL may contain '&' or '<'.
func marshal(v any) ([]byte, error) {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(v); err != nil {
		return nil, errors.Wrap(err, "cannot encode predicate")
	}
	return []byte(b.String()), nil
}
