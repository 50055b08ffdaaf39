// Package image builds the runtime OCI images of provider-widget and
// function-widget from static Go binaries, without Docker and without pulling
// a base image.
//
// An image has two layers on top of nothing (go-containerregistry's
// empty.Image):
//
//  1. a base layer, the same for every image: /etc/passwd and /etc/group with
//     root and nonroot (65532), /etc/nsswitch.conf, the Mozilla root CAs in
//     /etc/ssl/certs/ca-certificates.crt, /tmp and /home/nonroot;
//  2. the binary, owned by root and mode 0755, at the entrypoint path.
//
// The image runs as 65532:65532. Builds are reproducible: every timestamp is
// the supplied creation time, tar entries are sorted, owners are numeric and
// the layers are compressed with a fixed gzip level, so the same inputs give
// the same image digest on any machine.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// User is the numeric user and group the images run as: distroless's
// "nonroot". Crossplane's package runtime overrides it with its pod security
// context (2000:2000 by default), so nothing in the image depends on the
// user owning a file.
const User = "65532:65532"

// OCI annotation keys used as image labels.
const (
	LabelCreated     = "org.opencontainers.image.created"
	LabelDescription = "org.opencontainers.image.description"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelSource      = "org.opencontainers.image.source"
	LabelTitle       = "org.opencontainers.image.title"
	LabelVersion     = "org.opencontainers.image.version"
)

// Architectures are the GOARCH values Build accepts.
var Architectures = []string{"amd64", "arm64"}

// Config describes a runtime image.
type Config struct {
	// Binary is the path of a static linux binary for Arch.
	Binary string

	// Entrypoint is the absolute path of the binary in the image, e.g.
	// /usr/local/bin/provider. It is the image's only entrypoint argument.
	Entrypoint string

	// Arch is the GOARCH of Binary: amd64 or arm64. The OS is always linux.
	Arch string

	// Created is the image's creation time and every file's modification
	// time. Use the commit time (SOURCE_DATE_EPOCH) for reproducible builds.
	Created time.Time

	// Labels are the image config's labels, such as the OCI annotations
	// org.opencontainers.image.source, .revision and .version.
	Labels map[string]string

	// Ports the binary listens on, such as "8080/tcp". Informational only.
	Ports []string

	// Compression is the layers' gzip level; 0 means gzip.BestCompression,
	// which the packages' images use (their digests depend on it). A
	// throwaway image, such as a test's stand-in, may trade size for time
	// with gzip.BestSpeed.
	Compression int
}

// Build returns the runtime image that c describes. It reads the binary
// into memory; it neither pulls nor pushes anything.
func Build(c Config) (v1.Image, error) {
	if !isArch(c.Arch) {
		return nil, errors.Errorf("unsupported architecture %q: want one of %s", c.Arch, strings.Join(Architectures, ", "))
	}
	if !path.IsAbs(c.Entrypoint) || path.Clean(c.Entrypoint) != c.Entrypoint || c.Entrypoint == "/" {
		return nil, errors.Errorf("entrypoint %q is not a clean absolute file path", c.Entrypoint)
	}
	bin, err := os.ReadFile(c.Binary)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read binary")
	}
	created := c.Created.UTC().Truncate(time.Second)

	level := c.Compression
	if level == 0 {
		level = gzip.BestCompression
	}
	if level < gzip.HuffmanOnly || level > gzip.BestCompression {
		return nil, errors.Errorf("gzip level %d is not one of %d to %d", level, gzip.HuffmanOnly, gzip.BestCompression)
	}
	base, err := layer(baseFiles(), created, level)
	if err != nil {
		return nil, errors.Wrap(err, "cannot build base layer")
	}
	app, err := layer(binaryFiles(c.Entrypoint, bin), created, level)
	if err != nil {
		return nil, errors.Wrap(err, "cannot build binary layer")
	}

	ports := map[string]struct{}{}
	for _, p := range c.Ports {
		ports[p] = struct{}{}
	}
	if len(ports) == 0 {
		ports = nil
	}
	cfg := &v1.ConfigFile{
		Architecture: c.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint:   []string{c.Entrypoint},
			User:         User,
			WorkingDir:   "/",
			Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			Labels:       c.Labels,
			ExposedPorts: ports,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot set image config")
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "package/build: base files (passwd, group, nsswitch.conf, CA certificates)"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "package/build: " + c.Entrypoint}},
	)
	return img, errors.Wrap(err, "cannot add layers")
}

// WriteTarball writes img to file as a `docker save` tarball tagged tag,
// which `crossplane xpkg build --embed-runtime-image-tarball` reads and
// `docker load` can load.
func WriteTarball(img v1.Image, tag name.Tag, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return errors.Wrap(err, "cannot create image tarball")
	}
	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close()
		return errors.Wrap(err, "cannot write image tarball")
	}
	return errors.Wrap(f.Close(), "cannot close image tarball")
}

// Sizes are an image's sizes in bytes.
type Sizes struct {
	// Compressed is what a registry stores and a node pulls: the config,
	// the manifest and the gzipped layers.
	Compressed int64
	// Uncompressed is the size of the unpacked layers.
	Uncompressed int64
}

// Measure returns img's sizes.
func Measure(img v1.Image) (Sizes, error) {
	var s Sizes
	m, err := img.Manifest()
	if err != nil {
		return s, errors.Wrap(err, "cannot get manifest")
	}
	raw, err := img.RawManifest()
	if err != nil {
		return s, errors.Wrap(err, "cannot get manifest")
	}
	s.Compressed = int64(len(raw)) + m.Config.Size
	layers, err := img.Layers()
	if err != nil {
		return s, errors.Wrap(err, "cannot get layers")
	}
	for _, l := range layers {
		c, err := l.Size()
		if err != nil {
			return s, errors.Wrap(err, "cannot get layer size")
		}
		s.Compressed += c
		rc, err := l.Uncompressed()
		if err != nil {
			return s, errors.Wrap(err, "cannot read layer")
		}
		n, err := io.Copy(io.Discard, rc)
		_ = rc.Close()
		if err != nil {
			return s, errors.Wrap(err, "cannot read layer")
		}
		s.Uncompressed += n
	}
	return s, nil
}

func isArch(a string) bool {
	for _, s := range Architectures {
		if a == s {
			return true
		}
	}
	return false
}

// A file is a tar entry. A name ending in "/" is a directory.
type file struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
}

// baseFiles are the files every image has besides its binary.
func baseFiles() []file {
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: CACertificates()},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532},
		{name: "root/", mode: 0o700},
		{name: "tmp/", mode: 0o1777},
	}
}

// binaryFiles are the binary at entrypoint and its parent directories.
func binaryFiles(entrypoint string, bin []byte) []file {
	rel := strings.TrimPrefix(entrypoint, "/")
	fs := []file{{name: rel, mode: 0o755, data: bin}}
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		fs = append(fs, file{name: d + "/", mode: 0o755})
	}
	return fs
}

// layer returns a gzipped layer of files, sorted by name, each modified at
// mtime.
func layer(files []file, mtime time.Time, level int) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: mtime,
		}
		switch {
		case strings.HasSuffix(f.name, "/"):
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, errors.Wrapf(err, "cannot write tar header of %s", f.name)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, errors.Wrapf(err, "cannot write %s", f.name)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, errors.Wrap(err, "cannot close tar")
	}

	// Compress here rather than let go-containerregistry do it, so the
	// digest depends on the standard library's gzip at a fixed level only.
	// The gzip header has no name and a zero time.
	var gb bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gb, level)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create gzip writer")
	}
	if _, err := zw.Write(tb.Bytes()); err != nil {
		return nil, errors.Wrap(err, "cannot compress layer")
	}
	if err := zw.Close(); err != nil {
		return nil, errors.Wrap(err, "cannot compress layer")
	}
	gz := gb.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	})
	return l, errors.Wrap(err, "cannot create layer")
}
