package attest

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// build is a valid ProvenanceInput for provider-widget.
func build(mod ...func(in *ProvenanceInput)) ProvenanceInput {
	in := ProvenanceInput{
		Package:       "provider-widget",
		Version:       "v0.3.1",
		Repository:    "https://github.com/widgetco/crossplane-widget",
		Commit:        commit,
		Architectures: []string{"arm64", "amd64"},
		Registry:      "xpkg.upbound.io/widgetco",
		Builder:       "https://github.com/widgetco/crossplane-widget/Makefile#publish",
		Started:       commitTime,
		Finished:      commitTime,
	}
	for _, m := range mod {
		m(&in)
	}
	return in
}

func TestProvenanceDocument(t *testing.T) {
	source := slsaResource{
		URI:    "git+https://github.com/widgetco/crossplane-widget@" + commit,
		Digest: map[string]string{"gitCommit": commit},
	}
	external := slsaExternal{
		Source:        slsaSource{Repository: "https://github.com/widgetco/crossplane-widget", Commit: commit},
		Package:       "provider-widget",
		Version:       "v0.3.1",
		Architectures: []string{"amd64", "arm64"},
		Registry:      "xpkg.upbound.io/widgetco",
	}
	metadata := slsaMetadata{
		InvocationID: "provider-widget@v0.3.1/" + commit,
		StartedOn:    "2026-11-21T09:00:00Z",
		FinishedOn:   "2026-11-21T09:00:00Z",
	}
	cases := map[string]struct {
		reason string
		in     ProvenanceInput
		bins   []binary
		want   slsaProvenance
	}{
		"Configuration": {
			reason: "A build without binaries depends on its source alone and has no internal parameters.",
			in:     build(),
			want: slsaProvenance{
				BuildDefinition: slsaBuildDefinition{
					BuildType:            "https://github.com/widgetco/crossplane-widget/package/build@v1",
					ExternalParameters:   external,
					ResolvedDependencies: []slsaResource{source},
				},
				RunDetails: slsaRunDetails{
					Builder:  slsaBuilder{ID: "https://github.com/widgetco/crossplane-widget/Makefile#publish"},
					Metadata: metadata,
				},
			},
		},
		"Provider": {
			reason: "A binary adds its toolchain as a dependency, its build settings as internal parameters and itself as a byproduct.",
			in:     build(),
			bins:   []binary{provider},
			want: slsaProvenance{
				BuildDefinition: slsaBuildDefinition{
					BuildType:          "https://github.com/widgetco/crossplane-widget/package/build@v1",
					ExternalParameters: external,
					InternalParameters: &slsaInternal{Binaries: []slsaBinary{{
						Path:        "/usr/local/bin/provider",
						Platform:    "linux/amd64",
						MainPackage: "github.com/widgetco/crossplane-widget/provider",
						GoVersion:   "go1.26.8",
						Settings:    map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "GOARCH": "amd64", "GOOS": "linux"},
					}}},
					ResolvedDependencies: []slsaResource{
						source,
						{Name: "go", URI: "pkg:golang/stdlib@1.26.8", Annotations: map[string]string{"goVersion": "go1.26.8"}},
					},
				},
				RunDetails: slsaRunDetails{
					Builder:  slsaBuilder{ID: "https://github.com/widgetco/crossplane-widget/Makefile#publish", Version: map[string]string{"go": "go1.26.8"}},
					Metadata: metadata,
					Byproducts: []slsaResource{{
						Name:        "/usr/local/bin/provider",
						Digest:      map[string]string{"sha256": strings.Repeat("2", 64)},
						Annotations: map[string]string{"platform": "linux/amd64"},
					}},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := provenance(tc.in, commit, tc.bins)
			// JSON omits empty and nil lists alike.
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nprovenance(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProvenance(t *testing.T) {
	in := build(func(in *ProvenanceInput) {
		in.Commit = strings.ToUpper(commit)
		in.Binaries = []Binary{{Path: "/usr/local/bin/provider", File: widget}}
	})
	var p slsaProvenance
	reproducible(t, "Provenance(...)", PredicateSLSAProvenanceV1, func() ([]byte, error) { return Provenance(in) }, &p)
	t.Run("Source", func(t *testing.T) {
		want := slsaResource{
			URI:    "git+https://github.com/widgetco/crossplane-widget@" + commit,
			Digest: map[string]string{"gitCommit": commit},
		}
		if !slices.ContainsFunc(p.BuildDefinition.ResolvedDependencies, func(r slsaResource) bool { return cmp.Equal(want, r) }) {
			t.Errorf("Provenance(...): resolvedDependencies %+v lack the (lowercased) commit %+v", p.BuildDefinition.ResolvedDependencies, want)
		}
	})
	t.Run("Settings", func(t *testing.T) {
		want := map[string]string{"-trimpath": "true", "CGO_ENABLED": "0", "GOARCH": "amd64", "GOOS": "linux", "GOAMD64": "v1"}
		var got map[string]string
		if i := p.BuildDefinition.InternalParameters; i != nil && len(i.Binaries) == 1 {
			got = map[string]string{}
			for k := range want {
				got[k] = i.Binaries[0].Settings[k]
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Provenance(...) build settings of the binary: -want, +got:\n%s", diff)
		}
	})
	t.Run("Byproduct", func(t *testing.T) {
		want := []slsaResource{{
			Name:        "/usr/local/bin/provider",
			Digest:      map[string]string{"sha256": fileSHA256(t, widget)},
			Annotations: map[string]string{"platform": "linux/amd64"},
		}}
		if diff := cmp.Diff(want, p.RunDetails.Byproducts); diff != "" {
			t.Errorf("Provenance(...) byproducts: -want, +got:\n%s", diff)
		}
	})
}

func TestProvenanceErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     func(t *testing.T) ProvenanceInput
		// want is a part of the error.
		want string
	}{
		"NoPackage": {
			reason: "The package name is required.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Package = "" }) },
			want:   "pass Package",
		},
		"NoVersion": {
			reason: "The package version is required.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Version = "" }) },
			want:   "pass Version",
		},
		"NoRepository": {
			reason: "The source repository is required.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Repository = "" }) },
			want:   "pass Repository",
		},
		"NoCommit": {
			reason: "The commit is required.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Commit = "" }) },
			want:   "pass Commit",
		},
		"ShortCommit": {
			reason: "An abbreviated commit hash is refused.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Commit = "0123456" }) },
			want:   "40 hex digits",
		},
		"NotHexCommit": {
			reason: "A commit of 40 characters that are not all hex digits is refused.",
			in: func(*testing.T) ProvenanceInput {
				return build(func(in *ProvenanceInput) { in.Commit = strings.Repeat("g", 40) })
			},
			want: "40 hex digits",
		},
		"NoBuilder": {
			reason: "The builder ID is required.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Builder = "" }) },
			want:   "pass Builder",
		},
		"NoTimes": {
			reason: "The build times are required: Provenance never reads the clock.",
			in:     func(*testing.T) ProvenanceInput { return build(func(in *ProvenanceInput) { in.Started = time.Time{} }) },
			want:   "pass Started and Finished",
		},
		"FinishedBeforeStarted": {
			reason: "A build cannot finish before it starts.",
			in: func(*testing.T) ProvenanceInput {
				return build(func(in *ProvenanceInput) { in.Finished = in.Started.Add(-1) })
			},
			want: "before Started",
		},
		"NotGo": {
			reason: "A binary that is not a Go binary is refused, and the error names it.",
			in: func(t *testing.T) ProvenanceInput {
				return build(func(in *ProvenanceInput) { in.Binaries = []Binary{{Path: "/usr/local/bin/provider", File: notGo(t)}} })
			},
			want: "crossplane.yaml",
		},
		"OtherArchitecture": {
			reason: "A binary for an architecture the package is not built for is refused.",
			in: func(*testing.T) ProvenanceInput {
				return build(func(in *ProvenanceInput) {
					in.Architectures = []string{"arm64"}
					in.Binaries = []Binary{{Path: "/usr/local/bin/provider", File: widget}}
				})
			},
			want: "GOARCH amd64",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Provenance(tc.in(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\nProvenance(...): want an error mentioning %q, got %v", tc.reason, tc.want, err)
			}
		})
	}
}

func TestConsistent(t *testing.T) {
	with := func(settings ...debug.BuildSetting) binary {
		b := provider
		info := *b.info
		info.Settings = append(slices.Clone(info.Settings), settings...)
		b.info = &info
		return b
	}
	cases := map[string]struct {
		reason string
		in     ProvenanceInput
		b      binary
		// want is a part of the error, or "" for none.
		want string
	}{
		"NoVCS": {
			reason: "A binary built with -buildvcs=false records no commit to contradict.",
			in:     build(),
			b:      provider,
		},
		"SameCommit": {
			reason: "A binary built from the attested commit is consistent.",
			in:     build(),
			b:      with(debug.BuildSetting{Key: "vcs.revision", Value: commit}, debug.BuildSetting{Key: "vcs.modified", Value: "false"}),
		},
		"OtherCommit": {
			reason: "A binary built from another commit is refused.",
			in:     build(),
			b:      with(debug.BuildSetting{Key: "vcs.revision", Value: strings.Repeat("f", 40)}),
			want:   "built from commit " + strings.Repeat("f", 40),
		},
		"Modified": {
			reason: "A binary built from a modified work tree is refused when the build is not dirty.",
			in:     build(),
			b:      with(debug.BuildSetting{Key: "vcs.modified", Value: "true"}),
			want:   "modified work tree",
		},
		"ModifiedDirty": {
			reason: "A binary built from a modified work tree is consistent with a dirty build.",
			in:     build(func(in *ProvenanceInput) { in.Dirty = true }),
			b:      with(debug.BuildSetting{Key: "vcs.modified", Value: "true"}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.in.consistent(commit, tc.b)
			if tc.want == "" {
				if err != nil {
					t.Errorf("\n%s\nconsistent(...): %v", tc.reason, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\nconsistent(...): want an error mentioning %q, got %v", tc.reason, tc.want, err)
			}
		})
	}
}
