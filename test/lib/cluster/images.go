//go:build linux

package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/package/image"
)

// BuildImage packages a static binary as an image the way the project
// builds its own (package/image), with the directories dirs (image path to
// local directory) in a layer of their own.
func BuildImage(bin, entrypoint string, dirs map[string]string) (v1.Image, error) {
	img, err := image.Build(image.Config{
		Binary:      bin,
		Entrypoint:  entrypoint,
		Arch:        goarch,
		Created:     time.Unix(0, 0),
		Compression: gzip.BestSpeed,
	})
	if err != nil {
		return nil, errors.Wrapf(err, "cannot build an image of %s", bin)
	}
	if len(dirs) == 0 {
		return img, nil
	}
	b, err := treeTar(dirs)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, errors.Wrap(err, "cannot make a layer")
	}
	img, err = mutate.AppendLayers(img, l)
	return img, errors.Wrap(err, "cannot add a layer")
}

// treeTar is an uncompressed tar of the directories dirs (image path to
// local directory), readable by everyone.
func treeTar(dirs map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dst := range slices.Sorted(maps.Keys(dirs)) {
		src := dirs[dst]
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			n := filepath.ToSlash(filepath.Join(dst, rel))[1:]
			if d.IsDir() {
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		})
		if err != nil {
			return nil, errors.Wrapf(err, "cannot archive %s", src)
		}
	}
	return buf.Bytes(), errors.Wrap(tw.Close(), "cannot archive")
}

// Push pushes img to the cluster's registry as repoTag ("repo:tag") and
// returns its full reference (host/repo:tag).
func (c *Cluster) Push(ctx context.Context, img v1.Image, repoTag string) (string, error) {
	ref, err := name.ParseReference(c.Registry.Host+"/"+repoTag, name.StrictValidation)
	if err != nil {
		return "", errors.Wrapf(err, "cannot parse image reference %q", repoTag)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(c.Registry.Keychain())); err != nil {
		return "", errors.Wrapf(err, "cannot push %s", ref)
	}
	return ref.String(), nil
}
