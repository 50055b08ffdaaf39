package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestCommitFlags(t *testing.T) {
	notGit := t.TempDir()
	cases := map[string]struct {
		reason      string
		flags       commitFlags
		wantVersion string
		wantCreated time.Time
		wantErr     bool
	}{
		"AllGiven": {
			reason:      "With version, revision and SOURCE_DATE_EPOCH given, git is not needed.",
			flags:       commitFlags{RepoRoot: notGit, Version: "v1.0.0", Revision: "abc", SourceDateEpoch: "0"},
			wantVersion: "v1.0.0",
			wantCreated: time.Unix(0, 0).UTC(),
		},
		"NeedsGit": {
			reason:  "Without a revision the commit is described by git, which fails outside a work tree.",
			flags:   commitFlags{RepoRoot: notGit, Version: "v1.0.0", SourceDateEpoch: "0"},
			wantErr: true,
		},
		"BadEpoch": {
			reason:  "SOURCE_DATE_EPOCH is Unix seconds.",
			flags:   commitFlags{RepoRoot: notGit, Version: "v1.0.0", Revision: "abc", SourceDateEpoch: "yesterday"},
			wantErr: true,
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			b, err := tc.flags.builder(t.Context(), "out", &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nbuilder(...): want error %t, got %v", tc.reason, tc.wantErr, err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff([]any{tc.wantVersion, tc.wantCreated, "out"}, []any{b.Version, b.Created, b.OutputDir}); diff != "" {
				t.Errorf("\n%s\nbuilder(...) version, created, output: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestImageCmd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	type want struct {
		Arch       string
		Entrypoint []string
		Version    string
		Title      string
	}
	cases := map[string]struct {
		reason string
		cmd    imageCmd
		want   want
	}{
		"Provider": {
			reason: "The provider's image runs /usr/local/bin/provider.",
			cmd:    imageCmd{Package: "provider-widget", Arch: "amd64"},
			want:   want{Arch: "amd64", Entrypoint: []string{"/usr/local/bin/provider"}, Version: "v1.0.0", Title: "provider-widget"},
		},
		"Function": {
			reason: "The function's image runs /usr/local/bin/function.",
			cmd:    imageCmd{Package: "function-widget", Arch: "arm64"},
			want:   want{Arch: "arm64", Entrypoint: []string{"/usr/local/bin/function"}, Version: "v1.0.0", Title: "function-widget"},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			c := tc.cmd
			c.commitFlags = commitFlags{RepoRoot: t.TempDir(), Version: "v1.0.0", Revision: "abc", SourceDateEpoch: "0"}
			c.Binary = bin
			c.Out = filepath.Join(t.TempDir(), "image.tar")
			var stdout bytes.Buffer
			if err := c.Run(&env{ctx: t.Context(), stdout: &stdout, stderr: &bytes.Buffer{}}); err != nil {
				t.Fatalf("\n%s\nRun(...): %v", tc.reason, err)
			}
			img, err := tarball.ImageFromPath(c.Out, nil)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			got := want{Arch: cf.Architecture, Entrypoint: cf.Config.Entrypoint, Version: cf.Config.Labels["org.opencontainers.image.version"], Title: cf.Config.Labels["org.opencontainers.image.title"]}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nRun(...) image: -want, +got:\n%s", tc.reason, diff)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout.String(), d.String()) {
				t.Errorf("\n%s\nRun(...) printed %q, want the digest %s", tc.reason, stdout.String(), d)
			}
		})
	}
}

func TestPackageFlagsValidate(t *testing.T) {
	cases := map[string]struct {
		reason  string
		flags   packageFlags
		wantErr bool
	}{
		"Defaults":      {reason: "All three packages, the provider and function for both architectures.", flags: packageFlags{Package: []string{"provider-widget", "function-widget", "configuration-widget"}, Arch: []string{"amd64", "arm64"}}},
		"TwiceArch":     {reason: "An architecture named twice would build the same files concurrently.", flags: packageFlags{Package: []string{"provider-widget"}, Arch: []string{"amd64", "amd64"}}, wantErr: true},
		"TwicePackage":  {reason: "A package named twice would build the same files concurrently.", flags: packageFlags{Package: []string{"function-widget", "function-widget"}, Arch: []string{"arm64"}}, wantErr: true},
		"OnePackageOne": {reason: "One package for one architecture.", flags: packageFlags{Package: []string{"function-widget"}, Arch: []string{"arm64"}}},
		"Configuration": {reason: "The Configuration alone.", flags: packageFlags{Package: []string{"configuration-widget"}, Arch: []string{"amd64"}}},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if err := tc.flags.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("\n%s\nValidate(): want error %t, got %v", tc.reason, tc.wantErr, err)
			}
		})
	}
}

func TestPublishSigner(t *testing.T) {
	cases := map[string]struct {
		reason string
		cmd    publishCmd
		signs  bool
		err    string
	}{
		"Signed":        {reason: "A key and cosign sign.", cmd: publishCmd{SignKey: "cosign.key", Cosign: "/bin/cosign"}, signs: true},
		"KMS":           {reason: "A KMS URI is a key too.", cmd: publishCmd{SignKey: "awskms:///alias/widgetco", Cosign: "/bin/cosign"}, signs: true},
		"Unsigned":      {reason: "--unsigned publishes without cosign.", cmd: publishCmd{Unsigned: true}},
		"NeitherSaid":   {reason: "Publishing unsigned must be asked for.", cmd: publishCmd{Cosign: "/bin/cosign"}, err: "say how to sign"},
		"Both":          {reason: "A key and --unsigned contradict each other.", cmd: publishCmd{SignKey: "cosign.key", Unsigned: true}, err: "contradict"},
		"WithoutCosign": {reason: "A key without cosign says how to build it.", cmd: publishCmd{SignKey: "cosign.key"}, err: "hack/tools.sh cosign"},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			s, err := tc.cmd.signer()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("\n%s\nsigner(): got error %v, want one with %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("\n%s\nsigner(): %v", tc.reason, err)
			}
			if (s != nil) != tc.signs {
				t.Errorf("\n%s\nsigner(): signs %t, want %t", tc.reason, s != nil, tc.signs)
			}
		})
	}
}
