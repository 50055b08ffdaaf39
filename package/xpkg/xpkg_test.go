package xpkg

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-cmp/cmp"
)

func TestValidateVersion(t *testing.T) {
	cases := map[string]struct {
		reason  string
		version string
		wantErr bool
	}{
		"Tag":          {reason: "A release tag is a valid OCI tag.", version: "v1.2.3"},
		"AfterTag":     {reason: "git describe after a tag is a valid OCI tag.", version: "v1.2.3-4-gabcdef0"},
		"Untagged":     {reason: "An abbreviated commit is a valid OCI tag.", version: "275eea6"},
		"Dirty":        {reason: "A dirty work tree's version is a valid OCI tag.", version: "275eea6-dirty"},
		"Empty":        {reason: "A package needs a version.", version: "", wantErr: true},
		"BuildMeta":    {reason: "'+' is not allowed in an OCI tag.", version: "v1.2.3+build.1", wantErr: true},
		"LeadingDot":   {reason: "An OCI tag cannot start with '.'.", version: ".v1", wantErr: true},
		"LeadingDash":  {reason: "An OCI tag cannot start with '-'.", version: "-v1", wantErr: true},
		"Slash":        {reason: "'/' is not allowed in an OCI tag.", version: "release/v1", wantErr: true},
		"TooLong":      {reason: "An OCI tag has at most 128 characters.", version: string(make([]byte, 129)), wantErr: true},
		"AtDigestLike": {reason: "'@' is not allowed in an OCI tag.", version: "v1@sha256", wantErr: true},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			err := ValidateVersion(tc.version)
			if (err != nil) != tc.wantErr {
				t.Errorf("\n%s\nValidateVersion(%q): want error %t, got %v", tc.reason, tc.version, tc.wantErr, err)
			}
		})
	}
}

func TestParseEpoch(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      string
		want    time.Time
		wantErr bool
	}{
		"Epoch":    {reason: "Unix seconds are UTC.", in: "1763719200", want: time.Date(2025, 11, 21, 10, 0, 0, 0, time.UTC)},
		"Newline":  {reason: "git's trailing newline is ignored.", in: "0\n", want: time.Unix(0, 0).UTC()},
		"Negative": {reason: "Times before 1970 are refused.", in: "-1", wantErr: true},
		"NotInt":   {reason: "Only integer seconds are accepted.", in: "2025-11-21", wantErr: true},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			got, err := ParseEpoch(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nParseEpoch(%q): want error %t, got %v", tc.reason, tc.in, tc.wantErr, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nParseEpoch(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	cases := map[string]struct {
		reason  string
		name    string
		want    string
		wantErr bool
	}{
		"Provider": {reason: "provider-widget is built from ./provider.", name: "provider-widget", want: "./provider"},
		"Function": {reason: "function-widget is built from ./function.", name: "function-widget", want: "./function"},
		"Unknown":  {reason: "Only the two packages exist.", name: "provider-aws", wantErr: true},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			p, err := Lookup(tc.name)
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nLookup(%q): want error %t, got %v", tc.reason, tc.name, tc.wantErr, err)
			}
			if diff := cmp.Diff(tc.want, p.Main); diff != "" {
				t.Errorf("\n%s\nLookup(%q).Main: -want, +got:\n%s", tc.reason, tc.name, diff)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	b := &Builder{RepoRoot: "/src", OutputDir: "_output", Version: "v1.2.3"}
	bin := &Builder{RepoRoot: "/src", OutputDir: "/out", BinDir: "/bins", Version: "v1.2.3"}
	cases := map[string]struct {
		reason string
		got    string
		want   string
	}{
		"Binary":       {reason: "Binaries go to <output>/bin/linux_<arch>/<name>, relative to the repository.", got: b.Binary(Provider, "arm64"), want: "/src/_output/bin/linux_arm64/provider-widget"},
		"BinaryBinDir": {reason: "BinDir overrides where binaries go.", got: bin.Binary(Function, "amd64"), want: "/bins/linux_amd64/function-widget"},
		"Image":        {reason: "Runtime images are <output>/image/<name>-<version>-<arch>.tar.", got: b.ImageTarball(Function, "amd64"), want: "/src/_output/image/function-widget-v1.2.3-amd64.tar"},
		"Xpkg":         {reason: "Packages are <output>/xpkg/<name>-<version>-<arch>.xpkg.", got: bin.XpkgFile(Provider, "arm64"), want: "/out/xpkg/provider-widget-v1.2.3-arm64.xpkg"},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("\n%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	b := &Builder{Version: "v1.2.3", Revision: "0123abcd", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))}
	want := map[string]string{
		"org.opencontainers.image.created":     "2026-01-02T02:04:05Z",
		"org.opencontainers.image.description": Provider.Description,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.revision":    "0123abcd",
		"org.opencontainers.image.source":      "https://github.com/widgetco/crossplane-widget",
		"org.opencontainers.image.title":       "provider-widget",
		"org.opencontainers.image.version":     "v1.2.3",
	}
	if diff := cmp.Diff(want, b.Labels(Provider)); diff != "" {
		t.Errorf("Labels(Provider): -want, +got:\n%s", diff)
	}
}

func TestBuilderValidate(t *testing.T) {
	ok := Builder{RepoRoot: "/src", OutputDir: "_output", Version: "v1", Revision: "abc"}
	cases := map[string]struct {
		reason  string
		mod     func(b *Builder)
		wantErr bool
	}{
		"Complete":   {reason: "A builder with everything set is valid.", mod: func(*Builder) {}},
		"NoRoot":     {reason: "The repository root is required.", mod: func(b *Builder) { b.RepoRoot = "" }, wantErr: true},
		"NoOutput":   {reason: "The output directory is required.", mod: func(b *Builder) { b.OutputDir = "" }, wantErr: true},
		"NoRevision": {reason: "The revision label is required.", mod: func(b *Builder) { b.Revision = "" }, wantErr: true},
		"BadVersion": {reason: "The version must be an OCI tag.", mod: func(b *Builder) { b.Version = "v1+x" }, wantErr: true},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			b := ok
			tc.mod(&b)
			if err := b.validate(); (err != nil) != tc.wantErr {
				t.Errorf("\n%s\nvalidate(): want error %t, got %v", tc.reason, tc.wantErr, err)
			}
		})
	}
}

func TestBuildAndPublishNeedCrank(t *testing.T) {
	b := &Builder{RepoRoot: t.TempDir(), OutputDir: t.TempDir(), Version: "v1", Revision: "abc"}
	if _, err := b.Build(t.Context(), Provider, "amd64"); err == nil {
		t.Error("Build(...) without crank: want an error, got none")
	}
	if _, err := b.Publish(t.Context(), Provider, []string{"amd64"}, "127.0.0.1:5000/widgetco"); err == nil {
		t.Error("Publish(...) without crank: want an error, got none")
	}
}

func TestPublishRefusals(t *testing.T) {
	out := t.TempDir()
	b := &Builder{RepoRoot: t.TempDir(), OutputDir: out, Version: "v1", Revision: "abc", Crank: "/nonexistent/crank"}
	if err := os.MkdirAll(filepath.Join(out, "xpkg"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.XpkgFile(Provider, "amd64"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason   string
		registry string
		archs    []string
	}{
		"Scheme":       {reason: "A registry is a host and path, not a URL.", registry: "https://xpkg.example.com/widgetco", archs: []string{"amd64"}},
		"Tag":          {reason: "The registry names no tag; the version is the tag.", registry: "xpkg.example.com/widgetco:v1", archs: []string{"amd64"}},
		"NotBuilt":     {reason: "Only packages that were built can be pushed.", registry: "xpkg.example.com/widgetco", archs: []string{"amd64", "arm64"}},
		"CrankMissing": {reason: "A crank that does not run fails the push.", registry: "xpkg.example.com/widgetco", archs: []string{"amd64"}},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if _, err := b.Publish(t.Context(), Provider, tc.archs, tc.registry); err == nil {
				t.Errorf("\n%s\nPublish(..., %q): want an error, got none", tc.reason, tc.registry)
			}
		})
	}
}

// TestFromGit describes commits of a throwaway repository.
func TestFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := t.Context()
	dir := t.TempDir()
	when := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	gitDo := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_AUTHOR_DATE="+when.Format(time.RFC3339), "GIT_COMMITTER_DATE="+when.Format(time.RFC3339))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gitDo("init", "-q")
	write("a")
	gitDo("add", "f")
	gitDo("commit", "-q", "-m", "a")
	rev := func() string { t.Helper(); return trim(gitDo("rev-parse", "HEAD")) }

	commit := func() {
		t.Helper()
		gitDo("commit", "-q", "--allow-empty", "-m", "next")
	}

	cases := map[string]struct {
		reason string
		setup  func()
		want   func() Commit
	}{
		"Untagged": {
			reason: "Without a tag the version is a v0.0.0 pre-release counting every commit.",
			setup:  func() {},
			want:   func() Commit { return Commit{Version: "v0.0.0-dev.1.g" + rev()[:7], Revision: rev(), Time: when} },
		},
		"Tagged": {
			reason: "On a tag the version is the tag.",
			setup:  func() { gitDo("tag", "v1.2.3") },
			want:   func() Commit { return Commit{Version: "v1.2.3", Revision: rev(), Time: when} },
		},
		"Dirty": {
			reason: "Uncommitted changes add -dirty; the time is still the commit's.",
			setup:  func() { write("b") },
			want:   func() Commit { return Commit{Version: "v1.2.3-dirty", Revision: rev(), Time: when} },
		},
		"AfterTag": {
			reason: "Two commits after v1.2.3 the version is a pre-release of v1.2.4.",
			setup:  func() { gitDo("checkout", "-q", "f"); commit(); commit() },
			want:   func() Commit { return Commit{Version: "v1.2.4-dev.2.g" + rev()[:7], Revision: rev(), Time: when} },
		},
		"OtherTagsIgnored": {
			reason: "Tags that are not release versions do not count.",
			setup:  func() { gitDo("tag", "nightly"); gitDo("tag", "v2") },
			want:   func() Commit { return Commit{Version: "v1.2.4-dev.2.g" + rev()[:7], Revision: rev(), Time: when} },
		},
	}
	// The cases build on each other, so run them in order.
	for _, n := range []string{"Untagged", "Tagged", "Dirty", "AfterTag", "OtherTagsIgnored"} {
		tc := cases[n]
		t.Run(n, func(t *testing.T) {
			tc.setup()
			got, err := FromGit(context.Background(), dir)
			if err != nil {
				t.Fatalf("\n%s\nFromGit(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want(), got); diff != "" {
				t.Errorf("\n%s\nFromGit(...): -want, +got:\n%s", tc.reason, diff)
			}
			if Dirty(got.Version) != (n == "Dirty") {
				t.Errorf("\n%s\nDirty(%q): want %t", tc.reason, got.Version, n == "Dirty")
			}
		})
	}

	if _, err := FromGit(ctx, t.TempDir()); err == nil {
		t.Error("FromGit(not a repository): want an error, got none")
	}
}

func TestSemver(t *testing.T) {
	cases := map[string]struct {
		reason  string
		tag     string
		n       int
		dirty   bool
		want    string
		wantErr bool
	}{
		"Release":         {reason: "On a release tag the version is the tag.", tag: "v1.2.3", want: "v1.2.3"},
		"ReleaseDirty":    {reason: "Uncommitted changes on a tag make a pre-release of it.", tag: "v1.2.3", dirty: true, want: "v1.2.3-dirty"},
		"AfterRelease":    {reason: "After a release the next patch's pre-release.", tag: "v1.2.3", n: 4, want: "v1.2.4-dev.4.gabcdef0"},
		"AfterReleaseDty": {reason: "-dirty goes last.", tag: "v1.2.3", n: 4, dirty: true, want: "v1.2.4-dev.4.gabcdef0-dirty"},
		"AfterPrerelease": {reason: "After a pre-release tag its own pre-release continues.", tag: "v1.3.0-rc.1", n: 2, want: "v1.3.0-rc.1.dev.2.gabcdef0"},
		"NoTag":           {reason: "Without a tag a v0.0.0 pre-release.", n: 42, want: "v0.0.0-dev.42.gabcdef0"},
		"BuildMetadata":   {reason: "Build metadata cannot be part of an OCI tag.", tag: "v1.2.3+meta", want: "v1.2.3"},
		"NotSemver":       {reason: "A tag that is not MAJOR.MINOR.PATCH is an error.", tag: "v1.2", n: 1, wantErr: true},
		"Negative":        {reason: "A negative count is an error.", tag: "v1.2.3", n: -1, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Semver(tc.tag, tc.n, "abcdef0", tc.dirty)
			if (err != nil) != tc.wantErr {
				t.Fatalf("\n%s\nSemver(%q, %d, ...): error %v, want error %t", tc.reason, tc.tag, tc.n, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("\n%s\nSemver(%q, %d, ...): want %q, got %q", tc.reason, tc.tag, tc.n, tc.want, got)
			}
		})
	}

	// Versions of later commits sort later: what Crossplane's dependency
	// resolution relies on.
	order := []string{"v0.0.0-dev.9.gabcdef0", "v0.0.0-dev.10.gabcdef0", "v0.1.0", "v0.1.1-dev.1.gabcdef0", "v0.1.1-dev.2.gabcdef0", "v0.1.1"}
	for i := 1; i < len(order); i++ {
		a, b := semver.MustParse(order[i-1]), semver.MustParse(order[i])
		if !a.LessThan(b) {
			t.Errorf("want %s < %s", a.Original(), b.Original())
		}
	}
}

func trim(s string) string {
	for s != "" && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
