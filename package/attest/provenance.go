package attest

import (
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// BuildType is the buildType of our provenance: a build of a package image
// by this repository's package build (package/build), from a git commit.
// Its externalParameters are the source, package, version, architectures
// and registry; its internalParameters list each binary's Go build settings.
// A change to what these mean needs a new version of the URI.
const BuildType = "https://github.com/widgetco/crossplane-widget/package/build@v1"

// ProvenanceInput describes the build of a package image.
type ProvenanceInput struct {
	// Package is the package, e.g. "provider-widget".
	Package string
	// Version is the package version, e.g. "v0.3.1".
	Version string
	// Repository is the URL of the source repository, e.g.
	// "https://github.com/widgetco/crossplane-widget".
	Repository string
	// Commit is the full hash of the commit built, 40 hex digits.
	Commit string
	// Dirty is whether the work tree had uncommitted changes.
	Dirty bool
	// Architectures are the GOARCH values the package is built for.
	Architectures []string
	// Registry is where the package is published, e.g.
	// "xpkg.upbound.io/widgetco".
	Registry string
	// Builder is the builder ID, a URI naming what ran the build, e.g.
	// "https://github.com/widgetco/crossplane-widget/Makefile#publish".
	Builder string
	// Started and Finished are when the build ran. Callers pass the commit
	// time for both, so the provenance is reproducible; Provenance never
	// reads the clock.
	Started, Finished time.Time
	// Binaries are the Go binaries in the image. A Configuration has none.
	Binaries []Binary
}

type slsaProvenance struct {
	BuildDefinition slsaBuildDefinition `json:"buildDefinition"`
	RunDetails      slsaRunDetails      `json:"runDetails"`
}

type slsaBuildDefinition struct {
	BuildType            string         `json:"buildType"`
	ExternalParameters   slsaExternal   `json:"externalParameters"`
	InternalParameters   *slsaInternal  `json:"internalParameters,omitempty"`
	ResolvedDependencies []slsaResource `json:"resolvedDependencies"`
}

// slsaExternal are the parameters whoever starts a build chooses. A verifier
// compares these with what it expects, so they hold only what a user can
// pick: which commit, and what to publish where.
type slsaExternal struct {
	Source        slsaSource `json:"source"`
	Package       string     `json:"package"`
	Version       string     `json:"version"`
	Architectures []string   `json:"architectures,omitempty"`
	Registry      string     `json:"registry,omitempty"`
}

type slsaSource struct {
	Repository string `json:"repository"`
	Commit     string `json:"commit"`
	Dirty      bool   `json:"dirty"`
}

// slsaInternal are the parameters the builder sets on its own. The Go build
// settings are here, not in slsaExternal: -trimpath, CGO_ENABLED=0, the
// GOAMD64/GOARM64 baseline and the rest are fixed by the package build
// (package/xpkg's Compile), and GOARCH follows from the architectures asked
// for. No one starting a build can change them, so a verifier has nothing
// to compare them with; they are recorded for whoever investigates a
// binary, and a change to them is a change to the build type.
type slsaInternal struct {
	Binaries []slsaBinary `json:"binaries"`
}

type slsaBinary struct {
	Path        string            `json:"path"`
	Platform    string            `json:"platform"`
	MainPackage string            `json:"mainPackage"`
	GoVersion   string            `json:"goVersion"`
	Settings    map[string]string `json:"settings"`
}

// slsaResource is an in-toto ResourceDescriptor.
type slsaResource struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type slsaRunDetails struct {
	Builder    slsaBuilder    `json:"builder"`
	Metadata   slsaMetadata   `json:"metadata"`
	Byproducts []slsaResource `json:"byproducts,omitempty"`
}

type slsaBuilder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

type slsaMetadata struct {
	InvocationID string `json:"invocationId"`
	StartedOn    string `json:"startedOn"`
	FinishedOn   string `json:"finishedOn"`
}

// Provenance returns an SLSA Provenance v1 predicate, of type
// PredicateSLSAProvenanceV1 and build type BuildType, of the build in
// describes.
//
// Its resolvedDependencies are the git commit and the Go toolchain of each
// binary (as pkg:golang/stdlib, the purl scanners know). The Go modules the
// binaries were built from are not listed: go.sum in the commit pins them,
// and the SBOM lists them. The binaries are byproducts, with their SHA256.
//
// The output depends only on in and the binaries' content. Provenance
// refuses a binary whose build information contradicts in: another commit,
// a modified work tree when Dirty is false, or an architecture not in
// Architectures.
func Provenance(in ProvenanceInput) ([]byte, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	commit := strings.ToLower(in.Commit)
	bins, err := readBinaries(in.Binaries)
	if err != nil {
		return nil, err
	}
	for _, b := range bins {
		if err := in.consistent(commit, b); err != nil {
			return nil, err
		}
	}
	return marshal(provenance(in, commit, bins))
}

func (in ProvenanceInput) validate() error {
	switch {
	case in.Package == "":
		return errors.New("provenance needs the package name: pass Package, e.g. provider-widget")
	case in.Version == "":
		return errors.Errorf("provenance of %s needs the package version: pass Version, e.g. v0.3.1", in.Package)
	case in.Repository == "":
		return errors.Errorf("provenance of %s %s needs the source repository: pass Repository, e.g. https://github.com/widgetco/crossplane-widget", in.Package, in.Version)
	case in.Commit == "":
		return errors.Errorf("provenance of %s %s needs the commit built: pass Commit, the full hash (git rev-parse HEAD)", in.Package, in.Version)
	case !isCommit(in.Commit):
		return errors.Errorf("provenance of %s %s: commit %q is not a full git commit hash of 40 hex digits: pass the output of git rev-parse HEAD", in.Package, in.Version, in.Commit)
	case in.Builder == "":
		return errors.Errorf("provenance of %s %s needs the builder: pass Builder, a URI such as https://github.com/widgetco/crossplane-widget/Makefile#publish", in.Package, in.Version)
	case in.Started.IsZero() || in.Finished.IsZero():
		return errors.Errorf("provenance of %s %s needs the build times: pass Started and Finished, the commit time", in.Package, in.Version)
	case in.Finished.Before(in.Started):
		return errors.Errorf("provenance of %s %s: Finished (%s) is before Started (%s)", in.Package, in.Version, in.Finished.UTC().Format(time.RFC3339), in.Started.UTC().Format(time.RFC3339))
	}
	return nil
}

func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		hex := c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		if !hex {
			return false
		}
	}
	return true
}

// consistent returns an error when b's build information contradicts in.
// The package build compiles with -buildvcs=false, so Go usually records no
// commit; when it did, it must be the commit the provenance claims.
func (in ProvenanceInput) consistent(commit string, b binary) error {
	if r := b.setting("vcs.revision"); r != "" && r != commit {
		return errors.Errorf("binary %s was built from commit %s, not %s: rebuild it from the commit being attested", b.File, r, commit)
	}
	if b.setting("vcs.modified") == "true" && !in.Dirty {
		return errors.Errorf("binary %s was built from a modified work tree, but Dirty is false: rebuild it from a clean checkout", b.File)
	}
	if a := b.setting("GOARCH"); len(in.Architectures) > 0 && !slices.Contains(in.Architectures, a) {
		return errors.Errorf("binary %s is for GOARCH %s, which is not among the architectures %v", b.File, a, in.Architectures)
	}
	return nil
}

// provenance is the predicate of the build in describes, with the binaries
// bins that were read from in.Binaries.
func provenance(in ProvenanceInput, commit string, bins []binary) slsaProvenance {
	archs := slices.Clone(in.Architectures)
	slices.Sort(archs)
	archs = slices.Compact(archs)

	deps := []slsaResource{{
		URI:    "git+" + strings.TrimPrefix(in.Repository, "git+") + "@" + commit,
		Digest: map[string]string{"gitCommit": commit},
	}}
	var internal *slsaInternal
	byproducts := make([]slsaResource, 0, len(bins))
	toolchains := make([]string, 0, len(bins))
	for _, b := range bins {
		gv := goVersion(b.info.GoVersion)
		toolchains = append(toolchains, gv)
		if internal == nil {
			internal = &slsaInternal{}
		}
		internal.Binaries = append(internal.Binaries, slsaBinary{
			Path:        b.Path,
			Platform:    b.platform(),
			MainPackage: b.info.Path,
			GoVersion:   b.info.GoVersion,
			Settings:    settings(b),
		})
		byproducts = append(byproducts, slsaResource{
			Name:        b.Path,
			Digest:      map[string]string{"sha256": b.sha256},
			Annotations: map[string]string{"platform": b.platform()},
		})
	}
	slices.Sort(toolchains)
	toolchains = slices.Compact(toolchains)
	for _, gv := range toolchains {
		if u := stdlibPURL(gv); u != "" {
			deps = append(deps, slsaResource{Name: "go", URI: u, Annotations: map[string]string{"goVersion": gv}})
		}
	}
	var version map[string]string
	if len(toolchains) > 0 {
		version = map[string]string{"go": strings.Join(toolchains, " ")}
	}

	return slsaProvenance{
		BuildDefinition: slsaBuildDefinition{
			BuildType: BuildType,
			ExternalParameters: slsaExternal{
				Source:        slsaSource{Repository: in.Repository, Commit: commit, Dirty: in.Dirty},
				Package:       in.Package,
				Version:       in.Version,
				Architectures: archs,
				Registry:      in.Registry,
			},
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: slsaRunDetails{
			Builder: slsaBuilder{ID: in.Builder, Version: version},
			Metadata: slsaMetadata{
				// The same build of the same commit is the same invocation:
				// a reproducible build has nothing else to tell runs apart.
				InvocationID: in.Package + "@" + in.Version + "/" + commit,
				StartedOn:    in.Started.UTC().Format(time.RFC3339),
				FinishedOn:   in.Finished.UTC().Format(time.RFC3339),
			},
			Byproducts: byproducts,
		},
	}
}

// settings are b's Go build settings as Go recorded them: -trimpath,
// CGO_ENABLED, GOOS, GOARCH and its baseline, -tags, and -ldflags when the
// build did not use -trimpath.
func settings(b binary) map[string]string {
	m := make(map[string]string, len(b.info.Settings))
	for _, s := range b.info.Settings {
		m[s.Key] = s.Value
	}
	return m
}
