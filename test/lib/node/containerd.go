//go:build linux

package node

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Namespace is containerd's namespace for what kubelet runs (CRI); images
// are imported there.
const Namespace = "k8s.io"

// containerdConfig renders containerd's config (version 3, containerd 2.x).
// Everything containerd writes goes under dir, except the shims' sockets,
// which containerd always puts in /run/containerd/s.
func containerdConfig(dir, runc, cniBinDir, cniConfDir, sandboxImage string) string {
	q := strconv.Quote
	return strings.Join([]string{
		`version = 3`,
		`root = ` + q(filepath.Join(dir, "root")),
		`state = ` + q(filepath.Join(dir, "state")),
		`temp = ` + q(filepath.Join(dir, "tmp")),
		``,
		`[grpc]`,
		`  address = ` + q(filepath.Join(dir, "containerd.sock")),
		`[ttrpc]`,
		`  address = ` + q(filepath.Join(dir, "containerd.sock.ttrpc")),
		`[debug]`,
		`  level = "info"`,
		``,
		`[plugins]`,
		// Else it writes under /opt/containerd.
		`  [plugins.'io.containerd.internal.v1.opt']`,
		`    path = ` + q(filepath.Join(dir, "opt")),
		// Else it listens on /var/run/nri/nri.sock; nothing here uses NRI.
		`  [plugins.'io.containerd.nri.v1.nri']`,
		`    disable = true`,
		`  [plugins.'io.containerd.cri.v1.images']`,
		`    snapshotter = 'overlayfs'`,
		// A hosts.toml per registry (plainHTTPHost); credentials come
		// from the pods' pull Secrets.
		`    [plugins.'io.containerd.cri.v1.images'.registry]`,
		`      config_path = ` + q(filepath.Join(dir, "certs.d")),
		// Imported with ctr, never pulled: nothing comes from a public
		// registry, and a pinned image survives kubelet's image GC.
		`    [plugins.'io.containerd.cri.v1.images'.pinned_images]`,
		`      sandbox = ` + q(sandboxImage),
		`  [plugins.'io.containerd.cri.v1.runtime']`,
		// Root here lacks CAP_SYS_RESOURCE: no process may lower its
		// oom_score_adj, and runc fails ("can't get final child's PID from
		// pipe: EOF") unless containers get at least containerd's.
		`    restrict_oom_score_adj = true`,
		// Else the pods' network namespaces are mounted in /var/run/netns.
		`    netns_mounts_under_state_dir = true`,
		`    enable_cdi = false`,
		`    [plugins.'io.containerd.cri.v1.runtime'.containerd]`,
		`      default_runtime_name = 'runc'`,
		`      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]`,
		`        runtime_type = 'io.containerd.runc.v2'`,
		`        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]`,
		`          BinaryName = ` + q(runc),
		`          Root = ` + q(filepath.Join(dir, "runc")),
		`          SystemdCgroup = false`,
		`    [plugins.'io.containerd.cri.v1.runtime'.cni]`,
		`      bin_dirs = [` + q(cniBinDir) + `]`,
		`      conf_dir = ` + q(cniConfDir),
		`  [plugins.'io.containerd.grpc.v1.cri']`,
		`    stream_server_address = '127.0.0.1'`,
		`    stream_server_port = '0'`,
		``,
	}, "\n")
}

// plainHTTPHost is containerd's hosts.toml for a registry served over
// plain HTTP (containerd assumes HTTPS for any host but localhost).
func plainHTTPHost(hostPort string) []byte {
	u := strconv.Quote("http://" + hostPort)
	return []byte("server = " + u + "\n\n[host." + u + "]\n  capabilities = [\"pull\", \"resolve\"]\n")
}

// cniConfig renders the pod network: a bridge with the node's address as
// the gateway, host-local addresses from cidr (state under ipamDir), and no
// masquerading (no iptables): pods reach the node and each other only.
func cniConfig(bridge, cidr, gateway, ipamDir string) ([]byte, error) {
	c := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "widget-node",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges":  []any{[]any{map[string]any{"subnet": cidr, "gateway": gateway}}},
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
		},
	}
	b, err := json.MarshalIndent(c, "", "  ")
	return b, errors.Wrap(err, "cannot render the CNI config")
}

// ctr runs containerd's ctr against the node's containerd in namespace
// k8s.io.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	a := append([]string{"--address", n.containerdSock, "--namespace", Namespace}, args...)
	out, err := exec.CommandContext(ctx, n.tools.Ctr, a...).CombinedOutput() //nolint:gosec // the tool the caller named
	if err != nil {
		return string(out), errors.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// waitContainerd waits until containerd answers on its socket.
func (n *Node) waitContainerd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := n.ctr(ctx, "version"); err == nil {
			return nil
		}
		select {
		case <-n.containerd.Exited():
			return errors.Errorf("containerd exited (%v); see %s", n.containerd.Err(), n.containerd.LogPath())
		case <-ctx.Done():
			return errors.Errorf("containerd does not answer on %s; see %s", n.containerdSock, n.containerd.LogPath())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// importImage imports an image tarball (docker or OCI archive) into
// namespace k8s.io, unpacked for the overlayfs snapshotter.
func (n *Node) importImage(ctx context.Context, tarball string) error {
	if _, err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", tarball); err != nil {
		return errors.Wrapf(err, "cannot import %s", filepath.Base(tarball))
	}
	return nil
}

// writeFile writes data to path, creating its directory.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return errors.Wrapf(err, "cannot create %s", filepath.Dir(path))
	}
	return errors.Wrapf(os.WriteFile(path, data, 0o600), "cannot write %s", path)
}
