package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

var created = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// fakeBinary writes a stand-in for a static binary and returns its path.
func fakeBinary(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// entry is what the tests check of a tar entry.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
}

// flatten returns img's files in layer order and the content of each.
func flatten(t *testing.T, img v1.Image) ([]entry, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var es []entry
	content := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, entry{Name: h.Name, Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, ModTime: h.ModTime.UTC()})
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			content[h.Name] = b
		}
		_ = rc.Close()
	}
	return es, content
}

func TestBuild(t *testing.T) {
	dir := func(n string, mode int64) entry {
		return entry{Name: n, Type: tar.TypeDir, Mode: mode, ModTime: created}
	}
	reg := func(n string, mode int64) entry {
		return entry{Name: n, Type: tar.TypeReg, Mode: mode, ModTime: created}
	}
	base := []entry{
		dir("etc/", 0o755),
		reg("etc/group", 0o644),
		reg("etc/nsswitch.conf", 0o644),
		reg("etc/passwd", 0o644),
		dir("etc/ssl/", 0o755),
		dir("etc/ssl/certs/", 0o755),
		reg("etc/ssl/certs/ca-certificates.crt", 0o644),
		dir("home/", 0o755),
		{Name: "home/nonroot/", Type: tar.TypeDir, Mode: 0o700, UID: 65532, GID: 65532, ModTime: created},
		dir("root/", 0o700),
		dir("tmp/", 0o1777),
	}

	type want struct {
		config  v1.Config
		arch    string
		files   []entry
		binPath string
	}
	cases := map[string]struct {
		reason string
		c      Config
		want   want
	}{
		"ProviderAMD64": {
			reason: "The provider's image runs its binary as 65532 on linux/amd64, with the labels and ports given.",
			c: Config{
				Binary:     fakeBinary(t, "provider"),
				Entrypoint: "/usr/local/bin/provider",
				Arch:       "amd64",
				Created:    created.Add(300 * time.Millisecond),
				Labels:     map[string]string{LabelVersion: "v1.0.0", LabelRevision: "abc"},
				Ports:      []string{"8080/tcp", "8081/tcp"},
			},
			want: want{
				arch: "amd64",
				config: v1.Config{
					Entrypoint:   []string{"/usr/local/bin/provider"},
					User:         "65532:65532",
					WorkingDir:   "/",
					Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
					Labels:       map[string]string{LabelVersion: "v1.0.0", LabelRevision: "abc"},
					ExposedPorts: map[string]struct{}{"8080/tcp": {}, "8081/tcp": {}},
				},
				files: append(append([]entry{}, base...),
					dir("usr/", 0o755), dir("usr/local/", 0o755), dir("usr/local/bin/", 0o755),
					reg("usr/local/bin/provider", 0o755)),
				binPath: "usr/local/bin/provider",
			},
		},
		"FunctionARM64AtRoot": {
			reason: "A binary at the root needs no parent directories; no ports means none exposed.",
			c: Config{
				Binary:     fakeBinary(t, "function"),
				Entrypoint: "/function",
				Arch:       "arm64",
				Created:    created,
			},
			want: want{
				arch: "arm64",
				config: v1.Config{
					Entrypoint: []string{"/function"},
					User:       "65532:65532",
					WorkingDir: "/",
					Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
				},
				files:   append(append([]entry{}, base...), reg("function", 0o755)),
				binPath: "function",
			},
		},
		"FastCompression": {
			reason: "A throwaway image compressed at gzip's fastest level holds the same files.",
			c: Config{
				Binary:      fakeBinary(t, "standin"),
				Entrypoint:  "/standin",
				Arch:        "amd64",
				Created:     created,
				Compression: gzip.BestSpeed,
			},
			want: want{
				arch: "amd64",
				config: v1.Config{
					Entrypoint: []string{"/standin"},
					User:       "65532:65532",
					WorkingDir: "/",
					Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
				},
				files:   append(append([]entry{}, base...), reg("standin", 0o755)),
				binPath: "standin",
			},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			img, err := Build(tc.c)
			if err != nil {
				t.Fatalf("\n%s\nBuild(...): %v", tc.reason, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.config, cf.Config); diff != "" {
				t.Errorf("\n%s\nBuild(...) config: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]string{tc.want.arch, "linux", created.String()}, []string{cf.Architecture, cf.OS, cf.Created.UTC().String()}); diff != "" {
				t.Errorf("\n%s\nBuild(...) architecture, OS, created: -want, +got:\n%s", tc.reason, diff)
			}
			files, content := flatten(t, img)
			if diff := cmp.Diff(tc.want.files, files); diff != "" {
				t.Errorf("\n%s\nBuild(...) files: -want, +got:\n%s", tc.reason, diff)
			}
			bin, err := os.ReadFile(tc.c.Binary)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(bin), string(content[tc.want.binPath])); diff != "" {
				t.Errorf("\n%s\nBuild(...) binary: -want, +got:\n%s", tc.reason, diff)
			}
			if len(cf.History) != 2 {
				t.Errorf("\n%s\nBuild(...): want a history entry per layer, got %d", tc.reason, len(cf.History))
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	bin := fakeBinary(t, "x")
	cases := map[string]struct {
		reason string
		c      Config
	}{
		"UnsupportedArch":    {reason: "Only amd64 and arm64 are built.", c: Config{Binary: bin, Entrypoint: "/x", Arch: "386"}},
		"RelativeEntrypoint": {reason: "The entrypoint is an absolute path.", c: Config{Binary: bin, Entrypoint: "x", Arch: "amd64"}},
		"UncleanEntrypoint":  {reason: "The entrypoint is a clean path.", c: Config{Binary: bin, Entrypoint: "/usr/../x", Arch: "amd64"}},
		"RootEntrypoint":     {reason: "The entrypoint is a file.", c: Config{Binary: bin, Entrypoint: "/", Arch: "amd64"}},
		"NoBinary":           {reason: "The binary must exist.", c: Config{Binary: filepath.Join(t.TempDir(), "missing"), Entrypoint: "/x", Arch: "amd64"}},
		"CompressionTooHigh": {reason: "The gzip level is one gzip knows.", c: Config{Binary: bin, Entrypoint: "/x", Arch: "amd64", Compression: gzip.BestCompression + 1}},
		"CompressionTooLow":  {reason: "The gzip level is one gzip knows.", c: Config{Binary: bin, Entrypoint: "/x", Arch: "amd64", Compression: gzip.HuffmanOnly - 1}},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if _, err := Build(tc.c); err == nil {
				t.Errorf("\n%s\nBuild(...): want an error, got none", tc.reason)
			}
		})
	}
}

// TestBuildReproducible checks that the digest depends on the inputs only.
func TestBuildReproducible(t *testing.T) {
	c := Config{Binary: fakeBinary(t, "same"), Entrypoint: "/usr/local/bin/provider", Arch: "amd64", Created: created, Labels: map[string]string{LabelVersion: "v1"}}
	digest := func(c Config) string {
		img, err := Build(c)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	first := digest(c)
	other := c
	other.Created = created.Add(time.Second)
	arm := c
	arm.Arch = "arm64"

	cases := map[string]struct {
		reason string
		c      Config
		same   bool
	}{
		"SameInputs":  {reason: "Building the same inputs again gives the same digest.", c: c, same: true},
		"OtherTime":   {reason: "The creation time is part of the image.", c: other},
		"OtherArch":   {reason: "The architecture is part of the image.", c: arm},
		"CopiedInput": {reason: "The binary's path does not matter, only its content.", c: Config{Binary: fakeBinary(t, "same"), Entrypoint: c.Entrypoint, Arch: c.Arch, Created: c.Created, Labels: map[string]string{LabelVersion: "v1"}}, same: true},
		"BestCompressionByDefault": {reason: "Compression 0 is gzip's best level, which the packages' digests depend on.", c: func() Config {
			b := c
			b.Compression = gzip.BestCompression
			return b
		}(), same: true},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			if got := digest(tc.c) == first; got != tc.same {
				t.Errorf("\n%s\nsame digest: want %t, got %t", tc.reason, tc.same, got)
			}
		})
	}
}

// TestBaseLayerShared checks that every image shares the base layer, so a
// registry or node stores it once.
func TestBaseLayerShared(t *testing.T) {
	bases := make([]string, 0, 2)
	for _, c := range []Config{
		{Binary: fakeBinary(t, "p"), Entrypoint: "/usr/local/bin/provider", Arch: "amd64", Created: created},
		{Binary: fakeBinary(t, "f"), Entrypoint: "/usr/local/bin/function", Arch: "arm64", Created: created},
	} {
		img, err := Build(c)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		d, err := ls[0].Digest()
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, d.String())
	}
	if bases[0] != bases[1] {
		t.Errorf("base layers differ: %v", bases)
	}
}

func TestWriteTarball(t *testing.T) {
	img, err := Build(Config{Binary: fakeBinary(t, "p"), Entrypoint: "/usr/local/bin/provider", Arch: "arm64", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "img.tar")
	if err := WriteTarball(img, name.MustParseReference("provider-widget:v1-arm64").(name.Tag), out); err != nil {
		t.Fatalf("WriteTarball(...): %v", err)
	}
	got, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("tarball.ImageFromPath(...): %v", err)
	}
	want, _ := img.Digest()
	gotD, err := got.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, gotD); diff != "" {
		t.Errorf("WriteTarball(...) round trip digest: -want, +got:\n%s", diff)
	}
}

func TestMeasure(t *testing.T) {
	img, err := Build(Config{Binary: fakeBinary(t, string(bytes.Repeat([]byte("widget"), 100000))), Entrypoint: "/x", Arch: "amd64", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Measure(img)
	if err != nil {
		t.Fatalf("Measure(...): %v", err)
	}
	if s.Uncompressed < 600000 || s.Compressed <= 0 || s.Compressed >= s.Uncompressed {
		t.Errorf("Measure(...): want 0 < compressed < uncompressed and uncompressed >= the binary, got %+v", s)
	}
	// The same image flattened by go-containerregistry has the same size.
	n, err := io.Copy(io.Discard, mutate.Extract(img))
	if err != nil {
		t.Fatal(err)
	}
	if n > s.Uncompressed {
		t.Errorf("Measure(...): flattened image is %d bytes, more than the %d measured", n, s.Uncompressed)
	}
}

func TestCACertificates(t *testing.T) {
	rest := CACertificates()
	var got int
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("CACertificates(): certificate %d: %v", got, err)
		}
		got++
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("CACertificates(): %d bytes after the last certificate", len(rest))
	}
	var want int
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			want++
		}
	}
	if got != want || got < 100 {
		t.Errorf("CACertificates(): want the %d unconstrained roots (at least 100), got %d", want, got)
	}
	// A pool from the file trusts what Go's fallback roots trust.
	if !x509.NewCertPool().AppendCertsFromPEM(CACertificates()) {
		t.Error("CACertificates(): not usable as a certificate pool")
	}
}
