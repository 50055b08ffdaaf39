//go:build linux

package node

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestContainerdConfig(t *testing.T) {
	got := containerdConfig("/n/containerd", "/t/runc", "/t/cni", "/n/cni/net.d", "widget.local/node/pause:v1")
	// The settings this machine kind needs, each on its own line.
	for _, want := range []string{
		`version = 3`,
		`root = "/n/containerd/root"`,
		`state = "/n/containerd/state"`,
		`  address = "/n/containerd/containerd.sock"`,
		`    restrict_oom_score_adj = true`,
		`    netns_mounts_under_state_dir = true`,
		`    snapshotter = 'overlayfs'`,
		`      sandbox = "widget.local/node/pause:v1"`,
		`          BinaryName = "/t/runc"`,
		`          Root = "/n/containerd/runc"`,
		`      bin_dirs = ["/t/cni"]`,
		`      conf_dir = "/n/cni/net.d"`,
		`    disable = true`,
		`      config_path = "/n/containerd/certs.d"`,
	} {
		if !strings.Contains("\n"+got+"\n", "\n"+want+"\n") {
			t.Errorf("containerd config lacks the line %q:\n%s", want, got)
		}
	}
}

func TestPlainHTTPHost(t *testing.T) {
	got := string(plainHTTPHost("10.213.0.1:5000"))
	want := "server = \"http://10.213.0.1:5000\"\n\n[host.\"http://10.213.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hosts.toml: -want, +got:\n%s", diff)
	}
}

func TestCNIConfig(t *testing.T) {
	b, err := cniConfig("wnode0", "10.213.0.0/24", "10.213.0.1", "/n/cni/ipam")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			IPAM      struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
				Ranges  [][]struct {
					Subnet, Gateway string
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	p := c.Plugins[0]
	got := []any{len(c.Plugins), p.Type, p.Bridge, p.IsGateway, p.IPMasq, p.IPAM.Type, p.IPAM.DataDir, p.IPAM.Ranges[0][0].Subnet, p.IPAM.Ranges[0][0].Gateway}
	want := []any{1, "bridge", "wnode0", true, false, "host-local", "/n/cni/ipam", "10.213.0.0/24", "10.213.0.1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CNI config: -want, +got:\n%s", diff)
	}
}

func TestKubeletConfig(t *testing.T) {
	b, err := kubeletConfig(kubeletPaths{Root: "/n/k/root", PodLogs: "/n/k/pods", VolumePlugins: "/n/k/vp"}, "unix:///n/c.sock", "/widget-node-1", "10.213.0.1", "10.214.0.10", "/n/ca.crt", 10250, 10248)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               "/widget-node-1",
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix:///n/c.sock",
		"podLogsDir":               "/n/k/pods",
		"volumePluginDir":          "/n/k/vp",
		"address":                  "10.213.0.1",
		"readOnlyPort":             float64(0),
		"clusterDNS":               []any{"10.214.0.10"},
		"clusterDomain":            "cluster.local",
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": "/n/ca.crt"},
		},
	}
	for k, v := range want {
		if diff := cmp.Diff(v, got[k]); diff != "" {
			t.Errorf("kubelet config %s: -want, +got:\n%s", k, diff)
		}
	}
}
