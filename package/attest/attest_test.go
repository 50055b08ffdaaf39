package attest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// widget is a Go binary built from testdata/widget the way the package build
// compiles the provider and function (see TestMain).
var widget string

// widgetVersion is the version stamped into widget, as the package build
// stamps the package version.
const widgetVersion = "v9.8.7"

// TestMain builds widget once for all tests: for linux/amd64, static, with
// -trimpath and no VCS stamping, like package/xpkg's Compile. Building it
// takes about a second with a warm build cache (about 20 s with a cold one,
// which compiles the runtime for that target).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "attest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	widget = filepath.Join(dir, "widget")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+widgetVersion, "-o", widget, "./testdata/widget")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOAMD64=v1")
	out, err := cmd.CombinedOutput()
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot build testdata/widget: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// depVersion is the version of module p that testdata/widget is built
// with: the one in go.mod, as the go command reports it.
func depVersion(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Version}}", p).Output()
	if err != nil {
		t.Fatalf("cannot find the version of %s: %v", p, err)
	}
	return strings.TrimSpace(string(out))
}

// fileSHA256 is the SHA256 of the file at p, in hex.
func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// notGo writes a file that is not a Go binary and returns its path.
func notGo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "crossplane.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: meta.pkg.crossplane.io/v1\nkind: Configuration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadBinary(t *testing.T) {
	type want struct {
		path, platform, main, sha256 string
		// err is a part of the error, or "" for none.
		err string
	}
	cases := map[string]struct {
		reason string
		b      func(t *testing.T) Binary
		want   want
	}{
		"GoBinary": {
			reason: "A Go binary's build information and digest are read; its path is cleaned.",
			b:      func(*testing.T) Binary { return Binary{Path: "/usr/local//bin/widget", File: widget} },
			want: want{
				path:     "/usr/local/bin/widget",
				platform: "linux/amd64",
				main:     "github.com/widgetco/crossplane-widget/package/attest/testdata/widget",
				sha256:   fileSHA256(t, widget),
			},
		},
		"NotGo": {
			reason: "A file without Go build information is refused, and the error names it.",
			b:      func(t *testing.T) Binary { return Binary{Path: "/usr/local/bin/widget", File: notGo(t)} },
			want:   want{err: "crossplane.yaml"},
		},
		"Missing": {
			reason: "A file that does not exist is refused, and the error names it.",
			b: func(t *testing.T) Binary {
				return Binary{Path: "/usr/local/bin/widget", File: filepath.Join(t.TempDir(), "gone")}
			},
			want: want{err: "gone"},
		},
		"NoFile": {
			reason: "A binary needs its file on disk.",
			b:      func(*testing.T) Binary { return Binary{Path: "/usr/local/bin/widget"} },
			want:   want{err: "File"},
		},
		"RelativePath": {
			reason: "A binary's path in the image must be absolute.",
			b:      func(*testing.T) Binary { return Binary{Path: "usr/local/bin/widget", File: widget} },
			want:   want{err: "not absolute"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := readBinary(tc.b(t))
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Errorf("\n%s\nreadBinary(...): want an error mentioning %q, got %v", tc.reason, tc.want.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("\n%s\nreadBinary(...): %v", tc.reason, err)
			}
			got := want{path: b.Path, platform: b.platform(), main: b.info.Path, sha256: b.sha256}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nreadBinary(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestReadBinaries(t *testing.T) {
	_, err := readBinaries([]Binary{
		{Path: "/usr/local/bin/widget", File: widget},
		{Path: "/usr/local/bin/widget", File: widget},
	})
	if err == nil || !strings.Contains(err.Error(), "/usr/local/bin/widget") {
		t.Errorf("readBinaries(the same path twice): want an error naming the path, got %v", err)
	}
}

func TestModule(t *testing.T) {
	type want struct{ path, version string }
	cases := map[string]struct {
		reason string
		m      *debug.Module
		want   want
	}{
		"Plain": {
			reason: "A module that was not replaced is itself.",
			m:      &debug.Module{Path: "github.com/google/go-cmp", Version: "v0.7.0"},
			want:   want{"github.com/google/go-cmp", "v0.7.0"},
		},
		"Replaced": {
			reason: "A module replaced by another module is that module.",
			m: &debug.Module{Path: "github.com/pkg/errors", Version: "v0.9.1",
				Replace: &debug.Module{Path: "github.com/widgetco/errors", Version: "v0.9.2"}},
			want: want{"github.com/widgetco/errors", "v0.9.2"},
		},
		"ReplacedByDirectory": {
			reason: "A module replaced by a local directory keeps its path and has no version.",
			m: &debug.Module{Path: "github.com/pkg/errors", Version: "v0.9.1",
				Replace: &debug.Module{Path: "../errors"}},
			want: want{"github.com/pkg/errors", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, v := module(tc.m)
			if diff := cmp.Diff(tc.want, want{p, v}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nmodule(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPURL(t *testing.T) {
	cases := map[string]struct {
		reason string
		got    string
		want   string
	}{
		"Module": {
			reason: "A module's purl is its path and version.",
			got:    purl("github.com/google/go-cmp", "v0.7.0"),
			want:   "pkg:golang/github.com/google/go-cmp@v0.7.0",
		},
		"Lowercase": {
			reason: "The purl spec lowercases golang namespaces and names; '+' is percent-encoded.",
			got:    purl("github.com/BurntSushi/toml", "v1.0.0+incompatible"),
			want:   "pkg:golang/github.com/burntsushi/toml@v1.0.0%2Bincompatible",
		},
		"NoVersion": {
			reason: "A module without a version has a purl without one.",
			got:    purl("github.com/pkg/errors", ""),
			want:   "pkg:golang/github.com/pkg/errors",
		},
		"Stdlib": {
			reason: "The standard library's purl has the version without its go prefix.",
			got:    stdlibPURL("go1.26.8"),
			want:   "pkg:golang/stdlib@1.26.8",
		},
		"StdlibExperiment": {
			reason: "Experiments Go appends to the version are not part of it.",
			got:    stdlibPURL("go1.26.8 X:jsonv2"),
			want:   "pkg:golang/stdlib@1.26.8",
		},
		"StdlibDevel": {
			reason: "A development toolchain has no release, so no purl.",
			got:    stdlibPURL("devel go1.27-4b4c1d2 Tue Nov 3 10:00:00 2026 +0000"),
			want:   "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("\n%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSPDXIDs(t *testing.T) {
	ids := spdxIDs{}
	got := []string{
		ids.id("go github.com/a/b-c@v1.0.0", "Package", "go", "github.com/a/b-c", "v1.0.0"),
		ids.id("go github.com/a/b/c@v1.0.0", "Package", "go", "github.com/a/b/c", "v1.0.0"),
		ids.id("go github.com/a/b-c@v1.0.0", "Package", "go", "github.com/a/b-c", "v1.0.0"),
		ids.id("go example.com/x_y@v2.0.0+incompatible", "Package", "go", "example.com/x_y", "v2.0.0+incompatible"),
	}
	want := []string{
		"SPDXRef-Package-go-github.com-a-b-c-v1.0.0",
		// Sanitised to the same ID as the first: a hash of the key tells
		// them apart.
		"SPDXRef-Package-go-github.com-a-b-c-v1.0.0-" + sha256Prefix("go github.com/a/b/c@v1.0.0"),
		"SPDXRef-Package-go-github.com-a-b-c-v1.0.0",
		"SPDXRef-Package-go-example.com-x-y-v2.0.0-incompatible",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spdxIDs.id: -want, +got:\n%s", diff)
	}
	for _, id := range got {
		if !spdxIDPattern.MatchString(id) {
			t.Errorf("spdxIDs.id: %q does not match %s", id, spdxIDPattern)
		}
	}
}

func sha256Prefix(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// reproducible runs gen twice, fails unless both outputs are the same bytes
// and pass Check as predicateType, and decodes the output into v.
func reproducible(t *testing.T, what, predicateType string, gen func() ([]byte, error), v any) {
	t.Helper()
	b, err := gen()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	again, err := gen()
	if err != nil {
		t.Fatalf("%s again: %v", what, err)
	}
	if !bytes.Equal(b, again) {
		t.Errorf("%s twice with the same input: the outputs differ:\n%s\n%s", what, b, again)
	}
	if err := Check(predicateType, b); err != nil {
		t.Errorf("Check(%s, %s): %v", predicateType, what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s is not JSON: %v", what, err)
	}
}
