package harness

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Where a kubelet mounts a pod's ServiceAccount token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// tokenSeconds is how long the ServiceAccount tokens the node requests last.
// A kubelet requests one-hour tokens and refreshes them; the harness's runs
// are shorter than this, so it requests one per pod.
const tokenSeconds = 12 * 60 * 60

// makeRoot builds the container's root from the image and mounts the
// pod's volumes into it.
func (p *pod) makeRoot(ctx context.Context, root string, img *image, c corev1.Container) error {
	// An earlier attempt may have mounted volumes: removing their files
	// would empty a volume other containers share.
	if err := p.mounts.unmountUnder(root); err != nil {
		return errors.Wrap(err, "cannot clear the container root")
	}
	if err := os.RemoveAll(root); err != nil {
		return errors.Wrap(err, "cannot clear the container root")
	}
	if err := linkTree(img.rootfs, root); err != nil {
		return errors.Wrap(err, "cannot create the container root from the image")
	}
	if err := p.basics(root); err != nil {
		return err
	}
	return p.volumes(ctx, root, c)
}

// basics writes what a container runtime puts in every container.
func (p *pod) basics(root string) error {
	for _, d := range []string{"etc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil { //nolint:gosec // As in a container.
			return errors.Wrap(err, "cannot create the container's directories")
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		return errors.Wrap(err, "cannot make the container's /tmp writable")
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.0.1\t" + p.name + "\n"
	for f, data := range map[string]string{"etc/hosts": hosts, "etc/hostname": p.name + "\n"} {
		dst := filepath.Join(root, f)
		_ = os.Remove(dst)
		if err := os.WriteFile(dst, []byte(data), 0o644); err != nil { //nolint:gosec // World-readable, as in a container.
			return errors.Wrapf(err, "cannot write the container's /%s", f)
		}
	}
	null := filepath.Join(root, "dev", "null")
	_ = os.Remove(null)
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		return errors.Wrap(err, "cannot create the container's /dev/null")
	}
	return errors.Wrap(os.Chmod(null, 0o666), "cannot create the container's /dev/null") //nolint:gosec // /dev/null is world-writable.
}

// volumes writes the container's volume mounts and its ServiceAccount token
// into root. Files are owned by root and world-readable, as a kubelet writes
// Secret and ConfigMap volumes without an fsGroup. An emptyDir is one
// world-writable directory of the pod, bind-mounted into the root of every
// container that mounts it; so is a projected volume, whose
// ServiceAccount tokens the node refreshes (see projected).
func (p *pod) volumes(ctx context.Context, root string, c corev1.Container) error {
	byName := map[string]corev1.Volume{}
	for _, v := range p.spec.Volumes {
		byName[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := byName[m.Name]
		if !ok {
			return errors.Errorf("CreateContainerConfigError: volume mount %q names no volume", m.Name)
		}
		dir := filepath.Join(root, filepath.FromSlash(m.MountPath))
		if v.EmptyDir != nil {
			if err := p.emptyDir(v.Name, dir); err != nil {
				return errors.Wrapf(err, "cannot mount volume %s at %s", v.Name, m.MountPath)
			}
			continue
		}
		if v.Projected != nil {
			if err := p.projected(ctx, v, dir); err != nil {
				return errors.Wrapf(err, "cannot mount volume %s at %s", v.Name, m.MountPath)
			}
			continue
		}
		files, err := p.volumeFiles(ctx, v)
		if err != nil {
			return err
		}
		if err := writeVolume(dir, files, v.EmptyDir != nil); err != nil {
			return errors.Wrapf(err, "cannot mount volume %s at %s", v.Name, m.MountPath)
		}
	}
	if !ptr.Deref(p.spec.AutomountServiceAccountToken, true) {
		return nil
	}
	sa := p.serviceAccount()
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenSeconds)}}
	acct := &corev1.ServiceAccount{}
	acct.SetNamespace(p.env.namespace)
	acct.SetName(sa)
	if err := p.env.kube.SubResource("token").Create(ctx, acct, tr); err != nil {
		return errors.Wrapf(err, "CreateContainerConfigError: cannot request a token for ServiceAccount %s/%s", p.env.namespace, sa)
	}
	files := map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": p.env.apiCA, "namespace": []byte(p.env.namespace)}
	return errors.Wrap(writeVolume(filepath.Join(root, serviceAccountDir), files, false), "cannot mount the ServiceAccount token")
}

// emptyDir mounts the pod's emptyDir volume name at dir, creating it the
// first time.
func (p *pod) emptyDir(name, dir string) error {
	src := filepath.Join(p.dir, "volumes", name)
	if err := writeVolume(src, nil, true); err != nil {
		return err
	}
	return p.mounts.bind(src, dir)
}

// volumeFiles returns the files of a Secret, ConfigMap or emptyDir volume.
func (p *pod) volumeFiles(ctx context.Context, v corev1.Volume) (map[string][]byte, error) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: p.env.namespace, Name: n} }
	switch {
	case v.Secret != nil:
		s := &corev1.Secret{}
		if err := p.env.kube.Get(ctx, key(v.Secret.SecretName), s); err != nil {
			return nil, errors.Wrapf(err, "CreateContainerConfigError: cannot get Secret %s for volume %s", v.Secret.SecretName, v.Name)
		}
		return pick(s.Data, v.Secret.Items, v.Name)
	case v.ConfigMap != nil:
		cm := &corev1.ConfigMap{}
		if err := p.env.kube.Get(ctx, key(v.ConfigMap.Name), cm); err != nil {
			return nil, errors.Wrapf(err, "CreateContainerConfigError: cannot get ConfigMap %s for volume %s", v.ConfigMap.Name, v.Name)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		for k, b := range cm.BinaryData {
			data[k] = b
		}
		return pick(data, v.ConfigMap.Items, v.Name)
	case v.EmptyDir != nil:
		return nil, nil
	}
	return nil, errors.Errorf("CreateContainerConfigError: volume %s: the harness's node mounts only Secret, ConfigMap, projected and emptyDir volumes", v.Name)
}

// pick returns data's files, or only the listed items (key to path).
func pick(data map[string][]byte, items []corev1.KeyToPath, vol string) (map[string][]byte, error) {
	if len(items) == 0 {
		return data, nil
	}
	out := map[string][]byte{}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, errors.Errorf("CreateContainerConfigError: volume %s: key %q does not exist", vol, it.Key)
		}
		out[it.Path] = b
	}
	return out, nil
}

// writeVolume writes files into dir. An emptyDir is world-writable.
func writeVolume(dir string, files map[string][]byte, empty bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
		return err
	}
	if empty {
		return os.Chmod(dir, 0o777|os.ModeSticky)
	}
	for name, data := range files {
		rel := filepath.Clean("/" + name)
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // As a kubelet mounts volumes.
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil { //nolint:gosec // Secret volumes default to 0644.
			return err
		}
	}
	return nil
}

// linkTree recreates src's directories at dst and hard-links its files, so
// every container of an image starts from the image's files without copying
// them; they stay owned by the image's owners, so a non-root container
// cannot change them.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			if st != nil {
				if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
			return os.Chmod(to, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid))
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		default:
			return os.Link(path, to)
		}
	})
}
