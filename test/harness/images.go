package harness

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// maxImageFile bounds one file of an image: the harness unpacks images from
// packages anyone could have pushed, so a hostile layer must not fill the disk.
const maxImageFile = 512 << 20

// An image is a pulled, unpacked container image, as a node holds it.
type image struct {
	digest string
	rootfs string
	config v1.Config
}

// images pulls images from the loopback registry and unpacks each once.
type images struct {
	dir      string
	registry string

	mu     sync.Mutex
	byRef  map[string]*pull
	digest map[string]*image
}

type pull struct {
	once sync.Once
	img  *image
	err  error
}

func newImages(dir, registry string) *images {
	return &images{dir: dir, registry: registry, byRef: map[string]*pull{}, digest: map[string]*image{}}
}

// get pulls ref (for linux/GOARCH) with the credentials kc holds for its
// registry and unpacks it, or returns what an earlier pull of ref unpacked
// (imagePullPolicy IfNotPresent, which is what Crossplane sets - so, as on a
// node, a pod may start from an image another pod's credentials pulled).
func (is *images) get(ctx context.Context, ref string, kc authn.Keychain) (*image, error) {
	is.mu.Lock()
	p, ok := is.byRef[ref]
	if !ok {
		p = &pull{}
		is.byRef[ref] = p
	}
	is.mu.Unlock()
	p.once.Do(func() { p.img, p.err = is.pull(ctx, ref, kc) })
	if p.err != nil {
		// Let a later sync try again, as a kubelet would after a backoff.
		is.mu.Lock()
		if is.byRef[ref] == p {
			delete(is.byRef, ref)
		}
		is.mu.Unlock()
	}
	return p.img, p.err
}

func (is *images) pull(ctx context.Context, ref string, kc authn.Keychain) (*image, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot parse image reference %q", ref)
	}
	if r.Context().RegistryStr() != is.registry {
		return nil, errors.Errorf("cannot pull %s: the harness's node pulls only from the loopback registry %s", ref, is.registry)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		return nil, errors.Wrapf(err, "cannot pull image %s", ref)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, errors.Wrapf(err, "cannot get the digest of %s", ref)
	}
	is.mu.Lock()
	done := is.digest[d.String()]
	is.mu.Unlock()
	if done != nil {
		return done, nil
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read the config of %s", ref)
	}
	root := filepath.Join(is.dir, d.Hex, "rootfs")
	if err := os.RemoveAll(filepath.Dir(root)); err != nil {
		return nil, errors.Wrap(err, "cannot clear the image directory")
	}
	if err := os.MkdirAll(root, 0o755); err != nil { //nolint:gosec // An image root is world-readable, as on a node.
		return nil, errors.Wrap(err, "cannot create the image directory")
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list the layers of %s", ref)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read a layer of %s", ref)
		}
		err = unpack(tar.NewReader(rc), root)
		_ = rc.Close()
		if err != nil {
			return nil, errors.Wrapf(err, "cannot unpack a layer of %s", ref)
		}
	}
	out := &image{digest: d.String(), rootfs: root, config: cf.Config}
	is.mu.Lock()
	is.digest[d.String()] = out
	is.mu.Unlock()
	return out, nil
}

// unpack writes a layer into root, applying whiteouts. It refuses entries
// that would land outside root, directly or through a symlink.
func unpack(tr *tar.Reader, root string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := path.Clean("/" + h.Name)
		if rel == "/" {
			continue
		}
		dst := filepath.Join(root, filepath.FromSlash(rel))
		if err := insideRoot(root, filepath.Dir(dst)); err != nil {
			return errors.Wrapf(err, "layer entry %q", h.Name)
		}
		base := path.Base(rel)
		if base == ".wh..wh..opq" {
			if err := clearDir(filepath.Dir(dst)); err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(dst), strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		if err := unpackEntry(tr, h, root, dst); err != nil {
			return errors.Wrapf(err, "layer entry %q", h.Name)
		}
	}
}

func unpackEntry(tr *tar.Reader, h *tar.Header, root, dst string) error {
	mode := h.FileInfo().Mode() & (os.ModePerm | os.ModeSticky | os.ModeSetuid | os.ModeSetgid)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // Parents of image files are world-readable.
		return err
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(dst, mode); err != nil {
			return err
		}
	case tar.TypeReg:
		if h.Size > maxImageFile {
			return errors.Errorf("file of %d bytes is larger than the harness unpacks (%d)", h.Size, maxImageFile)
		}
		_ = os.RemoveAll(dst)
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, maxImageFile))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		_ = os.RemoveAll(dst)
		if err := os.Symlink(h.Linkname, dst); err != nil {
			return err
		}
	case tar.TypeLink:
		src := filepath.Join(root, filepath.FromSlash(path.Clean("/"+h.Linkname)))
		if err := insideRoot(root, src); err != nil {
			return err
		}
		_ = os.RemoveAll(dst)
		if err := os.Link(src, dst); err != nil {
			return err
		}
	default:
		// Devices and FIFOs have no place in a runtime image.
		return nil
	}
	if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
		return err
	}
	if h.Typeflag != tar.TypeSymlink {
		// Chown clears setuid bits; chmod after it.
		return os.Chmod(dst, mode)
	}
	return nil
}

// insideRoot fails when p, or any directory between root and p, is a
// symlink or is not under root.
func insideRoot(root, p string) error {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return errors.Errorf("%s is outside the image root", p)
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." || part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return errors.Errorf("%s goes through a symlink (%s)", p, cur)
		}
	}
	return nil
}

// clearDir removes everything in dir (an opaque whiteout).
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
