package attest

import (
	"crypto/sha1" //nolint:gosec // SPDX 2.3 computes the package verification code with SHA1.
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// SBOMInput describes the package image an SBOM is for.
type SBOMInput struct {
	// Name is the package, e.g. "provider-widget".
	Name string
	// Version is the package version, e.g. "v0.3.1".
	Version string
	// Created is when the build was made: the commit time, the same as the
	// image's creation time. SBOM never reads the clock.
	Created time.Time
	// Binaries are the Go binaries in the image. A Configuration has none.
	Binaries []Binary
}

// SPDX values this package writes.
const (
	spdxVersion     = "SPDX-2.3"
	spdxDocumentID  = "SPDXRef-DOCUMENT"
	spdxNoAssertion = "NOASSERTION"
	spdxCreator     = "Tool: widgetco-package-build"

	// spdxNamespace prefixes documentNamespace, which SPDX wants to be a
	// unique URI; nothing needs to be served there.
	spdxNamespace = "https://github.com/widgetco/crossplane-widget/spdx/"

	relDescribes     = "DESCRIBES"
	relContains      = "CONTAINS"
	relGeneratedFrom = "GENERATED_FROM"
	relDependsOn     = "DEPENDS_ON"
)

// SBOM returns an SPDX 2.3 JSON document, the predicate of type
// PredicateSPDX, of the Go binaries in the package image in describes.
//
// The document DESCRIBES one package named after the image, which CONTAINS
// a file per binary (path in the image, SHA1 and SHA256). Each file is
// GENERATED_FROM its Go main module, which DEPENDS_ON each module of the
// binary's build information (the replacement, where a module was replaced)
// and on the Go standard library of the toolchain that built it, so
// scanners match the toolchain's vulnerabilities too. Every Go package has a
// pkg:golang purl. Licenses are NOASSERTION: build information records none.
//
// The output depends only on in and the binaries' content. A binary without
// Go build information is an error naming its file.
func SBOM(in SBOMInput) ([]byte, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	bins, err := readBinaries(in.Binaries)
	if err != nil {
		return nil, err
	}
	return marshal(sbomDocument(in, bins))
}

func (in SBOMInput) validate() error {
	switch {
	case in.Name == "":
		return errors.New("SBOM needs the package name: pass Name, e.g. provider-widget")
	case in.Version == "":
		return errors.Errorf("SBOM of %s needs the package version: pass Version, e.g. v0.3.1", in.Name)
	case in.Created.IsZero():
		return errors.Errorf("SBOM of %s %s needs the creation time: pass Created, the commit time", in.Name, in.Version)
	}
	return nil
}

type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files,omitempty"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                  string            `json:"SPDXID"`
	Name                    string            `json:"name"`
	VersionInfo             string            `json:"versionInfo,omitempty"`
	DownloadLocation        string            `json:"downloadLocation"`
	FilesAnalyzed           bool              `json:"filesAnalyzed"`
	PackageVerificationCode *spdxVerification `json:"packageVerificationCode,omitempty"`
	LicenseConcluded        string            `json:"licenseConcluded"`
	LicenseDeclared         string            `json:"licenseDeclared"`
	CopyrightText           string            `json:"copyrightText"`
	Comment                 string            `json:"comment,omitempty"`
	ExternalRefs            []spdxExternalRef `json:"externalRefs,omitempty"`
	PrimaryPackagePurpose   string            `json:"primaryPackagePurpose,omitempty"`
}

type spdxVerification struct {
	Value string `json:"packageVerificationCodeValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxFile struct {
	SPDXID             string         `json:"SPDXID"`
	FileName           string         `json:"fileName"`
	FileTypes          []string       `json:"fileTypes"`
	Checksums          []spdxChecksum `json:"checksums"`
	LicenseConcluded   string         `json:"licenseConcluded"`
	LicenseInfoInFiles []string       `json:"licenseInfoInFiles"`
	CopyrightText      string         `json:"copyrightText"`
	Comment            string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// sbom assembles an SPDX document. Packages are added in a fixed order
// (binaries sorted, dependencies as Go sorts them), so the identifiers ids
// hands out are the same every time.
type sbom struct {
	ids      spdxIDs
	packages map[string]spdxPackage
	files    []spdxFile
	rels     map[spdxRelationship]bool
}

// sbomDocument is the SPDX document of the image in describes, with the
// binaries bins that were read from in.Binaries.
func sbomDocument(in SBOMInput, bins []binary) spdxDocument {
	s := &sbom{ids: spdxIDs{}, packages: map[string]spdxPackage{}, rels: map[spdxRelationship]bool{}}
	top := s.ids.id("xpkg "+in.Name, "Package", "xpkg", in.Name)
	s.relate(spdxDocumentID, relDescribes, top)
	for _, b := range bins {
		s.relate(top, relContains, s.addBinary(in.Version, b))
	}

	tp := spdxPackage{
		SPDXID:                top,
		Name:                  in.Name,
		VersionInfo:           in.Version,
		DownloadLocation:      spdxNoAssertion,
		LicenseConcluded:      spdxNoAssertion,
		LicenseDeclared:       spdxNoAssertion,
		CopyrightText:         spdxNoAssertion,
		Comment:               "The Crossplane package image.",
		PrimaryPackagePurpose: "CONTAINER",
	}
	// SPDX lets only a package whose files were analysed CONTAIN files.
	if len(s.files) > 0 {
		tp.FilesAnalyzed = true
		tp.PackageVerificationCode = &spdxVerification{Value: verificationCode(s.files)}
		tp.Comment += " Its files are its Go binaries only: the base layer and the package metadata are not listed."
	}

	pkgs := make([]spdxPackage, 0, len(s.packages))
	for _, p := range s.packages {
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool {
		if pkgs[i].Name != pkgs[j].Name {
			return pkgs[i].Name < pkgs[j].Name
		}
		return pkgs[i].SPDXID < pkgs[j].SPDXID
	})
	rels := make([]spdxRelationship, 0, len(s.rels))
	for r := range s.rels {
		rels = append(rels, r)
	}
	sort.Slice(rels, func(i, j int) bool { return relLess(rels[i], rels[j]) })

	return spdxDocument{
		SPDXVersion:       spdxVersion,
		DataLicense:       "CC0-1.0",
		SPDXID:            spdxDocumentID,
		Name:              in.Name + "-" + in.Version,
		DocumentNamespace: namespace(in, bins),
		CreationInfo: spdxCreationInfo{
			Created:  in.Created.UTC().Format(time.RFC3339),
			Creators: []string{spdxCreator},
		},
		Packages:      append([]spdxPackage{tp}, pkgs...),
		Files:         s.files,
		Relationships: rels,
	}
}

// addBinary adds b's file and Go packages and returns the file's ID.
// version is the package version, which stands in for the main module's
// when Go recorded none: the package build compiles with -buildvcs=false,
// so the main module is "(devel)", and it is the same commit the package
// version names.
func (s *sbom) addBinary(version string, b binary) string {
	gv := goVersion(b.info.GoVersion)
	file := s.ids.id("file "+b.platform()+" "+b.Path, "File", b.platform(), strings.TrimPrefix(b.Path, "/"))
	s.files = append(s.files, spdxFile{
		SPDXID:    file,
		FileName:  "." + b.Path, // SPDX file names are relative to the package root.
		FileTypes: []string{"BINARY"},
		Checksums: []spdxChecksum{
			{Algorithm: "SHA1", Value: b.sha1},
			{Algorithm: "SHA256", Value: b.sha256},
		},
		LicenseConcluded:   spdxNoAssertion,
		LicenseInfoInFiles: []string{spdxNoAssertion},
		CopyrightText:      spdxNoAssertion,
		Comment:            fmt.Sprintf("Go binary for %s of main package %s, built with %s.", b.platform(), b.info.Path, gv),
	})

	mv := b.info.Main.Version
	if mv == "" || mv == "(devel)" {
		mv = version
	}
	mainID := s.addModule(b.info.Main.Path, mv, "APPLICATION", "")
	s.relate(file, relGeneratedFrom, mainID)
	s.relate(mainID, relDependsOn, s.addStdlib(gv))
	for _, d := range b.info.Deps {
		p, v := module(d)
		comment := ""
		if d.Replace != nil {
			comment = fmt.Sprintf("%s %s replaced by %s %s.", d.Path, d.Version, d.Replace.Path, d.Replace.Version)
			if d.Replace.Version == "" {
				comment = fmt.Sprintf("%s %s replaced by the local directory %s.", d.Path, d.Version, d.Replace.Path)
			}
		}
		s.relate(mainID, relDependsOn, s.addModule(p, v, "LIBRARY", comment))
	}
	return file
}

// addModule adds the package of Go module p at version v, unless it is
// there already, and returns its ID.
func (s *sbom) addModule(p, v, purpose, comment string) string {
	id := s.ids.id("go "+p+"@"+v, "Package", "go", p, v)
	if _, ok := s.packages[id]; ok {
		return id
	}
	s.packages[id] = spdxPackage{
		SPDXID:                id,
		Name:                  p,
		VersionInfo:           v,
		DownloadLocation:      spdxNoAssertion,
		LicenseConcluded:      spdxNoAssertion,
		LicenseDeclared:       spdxNoAssertion,
		CopyrightText:         spdxNoAssertion,
		Comment:               comment,
		ExternalRefs:          []spdxExternalRef{purlRef(purl(p, v))},
		PrimaryPackagePurpose: purpose,
	}
	return id
}

// addStdlib adds the package of the standard library of Go toolchain gv,
// e.g. "go1.26.8", and returns its ID.
func (s *sbom) addStdlib(gv string) string {
	id := s.ids.id("gostd "+gv, "Package", "go-stdlib", gv)
	if _, ok := s.packages[id]; ok {
		return id
	}
	p := spdxPackage{
		SPDXID:                id,
		Name:                  "stdlib",
		VersionInfo:           gv,
		DownloadLocation:      spdxNoAssertion,
		LicenseConcluded:      spdxNoAssertion,
		LicenseDeclared:       spdxNoAssertion,
		CopyrightText:         spdxNoAssertion,
		Comment:               "The Go standard library and runtime of toolchain " + gv + ", compiled into the binary.",
		PrimaryPackagePurpose: "LIBRARY",
	}
	if u := stdlibPURL(gv); u != "" {
		p.ExternalRefs = []spdxExternalRef{purlRef(u)}
	}
	s.packages[id] = p
	return id
}

func (s *sbom) relate(element, typ, related string) {
	s.rels[spdxRelationship{Element: element, Type: typ, Related: related}] = true
}

func purlRef(u string) spdxExternalRef {
	return spdxExternalRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: u}
}

// relLess orders relationships: DESCRIBES first, as readers look for it
// there, then by element, type and related element.
func relLess(a, b spdxRelationship) bool {
	if (a.Type == relDescribes) != (b.Type == relDescribes) {
		return a.Type == relDescribes
	}
	if a.Element != b.Element {
		return a.Element < b.Element
	}
	if a.Type != b.Type {
		return a.Type < b.Type
	}
	return a.Related < b.Related
}

// verificationCode is SPDX 2.3's package verification code of files: the
// SHA1 of their SHA1s, sorted, concatenated.
func verificationCode(files []spdxFile) string {
	sums := make([]string, 0, len(files))
	for _, f := range files {
		for _, c := range f.Checksums {
			if c.Algorithm == "SHA1" {
				sums = append(sums, c.Value)
			}
		}
	}
	sort.Strings(sums)
	h := sha1.Sum([]byte(strings.Join(sums, ""))) //nolint:gosec // see the import.
	return hex.EncodeToString(h[:])
}

// namespace is the documentNamespace of the SBOM of in: unique per package,
// version and binaries, and the same for the same ones, so that a rebuild
// gives the same document and a different build a different one.
func namespace(in SBOMInput, bins []binary) string {
	var s strings.Builder
	s.WriteString(in.Name + "\n" + in.Version + "\n")
	for _, b := range bins {
		s.WriteString(b.Path + " " + b.platform() + " " + b.sha256 + "\n")
	}
	h := sha256.Sum256([]byte(s.String()))
	return spdxNamespace + url.PathEscape(in.Name) + "/" + url.PathEscape(in.Version) + "/" + hex.EncodeToString(h[:])
}

// spdxIDs hands out SPDX identifiers: the parts of a name joined by '-',
// with every character SPDX does not allow replaced by '-'. Two names that
// come out the same (github.com/a/b-c and github.com/a/b/c) would share an
// identifier, so the second gets a suffix from a hash of its key.
type spdxIDs map[string]string // ID -> the key it was given for

func (ids spdxIDs) id(key string, parts ...string) string {
	var b strings.Builder
	b.WriteString("SPDXRef")
	for _, p := range parts {
		if p == "" {
			continue
		}
		b.WriteByte('-')
		for _, r := range p {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				b.WriteRune(r)
				continue
			}
			b.WriteByte('-')
		}
	}
	id := b.String()
	if k, ok := ids[id]; ok && k != key {
		h := sha256.Sum256([]byte(key))
		id += "-" + hex.EncodeToString(h[:4])
	}
	ids[id] = key
	return id
}
