package attest

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var commitTime = time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("CET", 3600))

// provider is a binary as readBinary returns it, with made-up digests.
var provider = binary{
	Binary: Binary{Path: "/usr/local/bin/provider", File: "_output/bin/linux_amd64/provider-widget"},
	info: &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Path:      "github.com/widgetco/crossplane-widget/provider",
		Main:      debug.Module{Path: "github.com/widgetco/crossplane-widget", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/google/go-cmp", Version: "v0.7.0", Sum: "h1:wk8382ETsv4JYUZwIsn6YpYiWiBsYLSJiTsyBybVuN8="},
			{Path: "github.com/pkg/errors", Version: "v0.9.1", Replace: &debug.Module{Path: "../errors"}},
			{Path: "golang.org/x/time", Version: "v0.14.0", Replace: &debug.Module{Path: "golang.org/x/time", Version: "v0.15.0"}},
		},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "GOARCH", Value: "amd64"},
			{Key: "GOOS", Value: "linux"},
		},
	},
	sha1:   strings.Repeat("1", 40),
	sha256: strings.Repeat("2", 64),
}

// noAssertion fills in the license and copyright fields, which are always
// NOASSERTION.
func noAssertion(p spdxPackage) spdxPackage {
	p.DownloadLocation, p.LicenseConcluded, p.LicenseDeclared, p.CopyrightText = "NOASSERTION", "NOASSERTION", "NOASSERTION", "NOASSERTION"
	return p
}

func TestSBOMDocument(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     SBOMInput
		bins   []binary
		want   spdxDocument
	}{
		"Configuration": {
			reason: "A package without binaries is described by its top package alone, which contains no files.",
			in:     SBOMInput{Name: "configuration-widget", Version: "v0.3.1", Created: commitTime},
			want: spdxDocument{
				SPDXVersion:       "SPDX-2.3",
				DataLicense:       "CC0-1.0",
				SPDXID:            "SPDXRef-DOCUMENT",
				Name:              "configuration-widget-v0.3.1",
				DocumentNamespace: "https://github.com/widgetco/crossplane-widget/spdx/configuration-widget/v0.3.1/3179f553799fd6bc2e2d2ad2f89ec0f994826942dba0f3073e0e025fb2478e21",
				CreationInfo:      spdxCreationInfo{Created: "2026-11-21T09:00:00Z", Creators: []string{"Tool: widgetco-package-build"}},
				Packages: []spdxPackage{noAssertion(spdxPackage{
					SPDXID: "SPDXRef-Package-xpkg-configuration-widget", Name: "configuration-widget", VersionInfo: "v0.3.1",
					Comment: "The Crossplane package image.", PrimaryPackagePurpose: "CONTAINER",
				})},
				Relationships: []spdxRelationship{
					{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: "SPDXRef-Package-xpkg-configuration-widget"},
				},
			},
		},
		"Provider": {
			reason: "The top package contains the binary, generated from its main module, which depends on the standard library and each (replaced) module.",
			in:     SBOMInput{Name: "provider-widget", Version: "v0.3.1", Created: commitTime},
			bins:   []binary{provider},
			want: spdxDocument{
				SPDXVersion:       "SPDX-2.3",
				DataLicense:       "CC0-1.0",
				SPDXID:            "SPDXRef-DOCUMENT",
				Name:              "provider-widget-v0.3.1",
				DocumentNamespace: "https://github.com/widgetco/crossplane-widget/spdx/provider-widget/v0.3.1/a2283997cbb0384ffecc4653abcd8c0f9f1361ce3e6bc7a9bc71ca4bff217ee6",
				CreationInfo:      spdxCreationInfo{Created: "2026-11-21T09:00:00Z", Creators: []string{"Tool: widgetco-package-build"}},
				Packages: []spdxPackage{
					noAssertion(spdxPackage{
						SPDXID: "SPDXRef-Package-xpkg-provider-widget", Name: "provider-widget", VersionInfo: "v0.3.1",
						FilesAnalyzed:           true,
						PackageVerificationCode: &spdxVerification{Value: "0a05a9e69e5757ac71c75a50418622624f042c97"},
						Comment:                 "The Crossplane package image. Its files are its Go binaries only: the base layer and the package metadata are not listed.",
						PrimaryPackagePurpose:   "CONTAINER",
					}),
					noAssertion(spdxPackage{
						SPDXID: "SPDXRef-Package-go-github.com-google-go-cmp-v0.7.0", Name: "github.com/google/go-cmp", VersionInfo: "v0.7.0",
						ExternalRefs:          []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/github.com/google/go-cmp@v0.7.0"}},
						PrimaryPackagePurpose: "LIBRARY",
					}),
					noAssertion(spdxPackage{
						SPDXID: "SPDXRef-Package-go-github.com-pkg-errors", Name: "github.com/pkg/errors",
						Comment:               "github.com/pkg/errors v0.9.1 replaced by the local directory ../errors.",
						ExternalRefs:          []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/github.com/pkg/errors"}},
						PrimaryPackagePurpose: "LIBRARY",
					}),
					noAssertion(spdxPackage{
						SPDXID: "SPDXRef-Package-go-github.com-widgetco-crossplane-widget-v0.3.1", Name: "github.com/widgetco/crossplane-widget", VersionInfo: "v0.3.1",
						ExternalRefs:          []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/github.com/widgetco/crossplane-widget@v0.3.1"}},
						PrimaryPackagePurpose: "APPLICATION",
					}),
					noAssertion(spdxPackage{
						SPDXID: "SPDXRef-Package-go-golang.org-x-time-v0.15.0", Name: "golang.org/x/time", VersionInfo: "v0.15.0",
						Comment:               "golang.org/x/time v0.14.0 replaced by golang.org/x/time v0.15.0.",
						ExternalRefs:          []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/golang.org/x/time@v0.15.0"}},
						PrimaryPackagePurpose: "LIBRARY",
					}),
					noAssertion(spdxPackage{
						SPDXID: "SPDXRef-Package-go-stdlib-go1.26.8", Name: "stdlib", VersionInfo: "go1.26.8",
						Comment:               "The Go standard library and runtime of toolchain go1.26.8, compiled into the binary.",
						ExternalRefs:          []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/stdlib@1.26.8"}},
						PrimaryPackagePurpose: "LIBRARY",
					}),
				},
				Files: []spdxFile{{
					SPDXID:    "SPDXRef-File-linux-amd64-usr-local-bin-provider",
					FileName:  "./usr/local/bin/provider",
					FileTypes: []string{"BINARY"},
					Checksums: []spdxChecksum{
						{Algorithm: "SHA1", Value: strings.Repeat("1", 40)},
						{Algorithm: "SHA256", Value: strings.Repeat("2", 64)},
					},
					LicenseConcluded:   "NOASSERTION",
					LicenseInfoInFiles: []string{"NOASSERTION"},
					CopyrightText:      "NOASSERTION",
					Comment:            "Go binary for linux/amd64 of main package github.com/widgetco/crossplane-widget/provider, built with go1.26.8.",
				}},
				Relationships: []spdxRelationship{
					{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: "SPDXRef-Package-xpkg-provider-widget"},
					{Element: "SPDXRef-File-linux-amd64-usr-local-bin-provider", Type: "GENERATED_FROM", Related: "SPDXRef-Package-go-github.com-widgetco-crossplane-widget-v0.3.1"},
					{Element: "SPDXRef-Package-go-github.com-widgetco-crossplane-widget-v0.3.1", Type: "DEPENDS_ON", Related: "SPDXRef-Package-go-github.com-google-go-cmp-v0.7.0"},
					{Element: "SPDXRef-Package-go-github.com-widgetco-crossplane-widget-v0.3.1", Type: "DEPENDS_ON", Related: "SPDXRef-Package-go-github.com-pkg-errors"},
					{Element: "SPDXRef-Package-go-github.com-widgetco-crossplane-widget-v0.3.1", Type: "DEPENDS_ON", Related: "SPDXRef-Package-go-golang.org-x-time-v0.15.0"},
					{Element: "SPDXRef-Package-go-github.com-widgetco-crossplane-widget-v0.3.1", Type: "DEPENDS_ON", Related: "SPDXRef-Package-go-stdlib-go1.26.8"},
					{Element: "SPDXRef-Package-xpkg-provider-widget", Type: "CONTAINS", Related: "SPDXRef-File-linux-amd64-usr-local-bin-provider"},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := sbomDocument(tc.in, tc.bins)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nsbomDocument(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSBOM(t *testing.T) {
	in := SBOMInput{
		Name:     "provider-widget",
		Version:  widgetVersion,
		Created:  commitTime,
		Binaries: []Binary{{Path: "/usr/local/bin/provider", File: widget}},
	}
	var d spdxDocument
	reproducible(t, "SBOM(...)", PredicateSPDX, func() ([]byte, error) { return SBOM(in) }, &d)

	t.Run("Packages", func(t *testing.T) {
		// Each package's name@version and purl.
		got := map[string]string{}
		for _, p := range d.Packages {
			got[p.Name+"@"+p.VersionInfo] = ""
			for _, r := range p.ExternalRefs {
				if r.Category == "PACKAGE-MANAGER" && r.Type == "purl" {
					got[p.Name+"@"+p.VersionInfo] = r.Locator
				}
			}
		}
		cmpVersion := depVersion(t, "github.com/google/go-cmp")
		gv := goVersion(runtimeVersion(t, widget))
		want := map[string]string{
			"provider-widget@v9.8.7": "",
			// -buildvcs=false: Go recorded (devel), the package version stands in.
			"github.com/widgetco/crossplane-widget@v9.8.7": "pkg:golang/github.com/widgetco/crossplane-widget@v9.8.7",
			"github.com/google/go-cmp@" + cmpVersion:       "pkg:golang/github.com/google/go-cmp@" + cmpVersion,
			"stdlib@" + gv:                                 "pkg:golang/stdlib@" + strings.TrimPrefix(gv, "go"),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SBOM(...) packages: -want, +got:\n%s", diff)
		}
	})

	t.Run("File", func(t *testing.T) {
		want := []spdxChecksum{{Algorithm: "SHA256", Value: fileSHA256(t, widget)}}
		var got []spdxChecksum
		for _, f := range d.Files {
			if f.FileName != "./usr/local/bin/provider" {
				t.Errorf("SBOM(...): unexpected file %q", f.FileName)
			}
			got = slices.DeleteFunc(slices.Clone(f.Checksums), func(c spdxChecksum) bool { return c.Algorithm != "SHA256" })
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SBOM(...) SHA256 of ./usr/local/bin/provider: -want, +got:\n%s", diff)
		}
	})
}

// runtimeVersion is the Go version that built the binary at p.
func runtimeVersion(t *testing.T, p string) string {
	t.Helper()
	b, err := readBinary(Binary{Path: "/bin", File: p})
	if err != nil {
		t.Fatal(err)
	}
	return b.info.GoVersion
}

func TestSBOMErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     func(t *testing.T) SBOMInput
		// want is a part of the error.
		want string
	}{
		"NoName": {
			reason: "The package name is required.",
			in:     func(*testing.T) SBOMInput { return SBOMInput{Version: "v0.3.1", Created: commitTime} },
			want:   "pass Name",
		},
		"NoVersion": {
			reason: "The package version is required.",
			in:     func(*testing.T) SBOMInput { return SBOMInput{Name: "provider-widget", Created: commitTime} },
			want:   "pass Version",
		},
		"NoCreated": {
			reason: "The creation time is required: SBOM never reads the clock.",
			in:     func(*testing.T) SBOMInput { return SBOMInput{Name: "provider-widget", Version: "v0.3.1"} },
			want:   "pass Created",
		},
		"NotGo": {
			reason: "A binary that is not a Go binary is refused, and the error names it.",
			in: func(t *testing.T) SBOMInput {
				return SBOMInput{Name: "provider-widget", Version: "v0.3.1", Created: commitTime,
					Binaries: []Binary{{Path: "/usr/local/bin/provider", File: notGo(t)}}}
			},
			want: "crossplane.yaml",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := SBOM(tc.in(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\nSBOM(...): want an error mentioning %q, got %v", tc.reason, tc.want, err)
			}
		})
	}
}
