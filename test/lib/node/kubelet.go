//go:build linux

package node

import (
	"encoding/json"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// kubeletPaths are the directories kubelet writes to; each has a default
// outside the node's directory (/var/lib/kubelet, /var/log/pods,
// /usr/libexec/kubernetes/kubelet-plugins/volume/exec).
type kubeletPaths struct {
	Root, PodLogs, VolumePlugins string
}

// kubeletConfig renders a KubeletConfiguration (JSON, which kubelet reads
// as YAML) for this machine kind: cgroup v1 with the cgroupfs driver,
// swap allowed, the pods' cgroups under a cgroup root of the node's own.
func kubeletConfig(p kubeletPaths, runtimeEndpoint, cgroupRoot, address, clusterDNS, clientCAFile string, port, healthzPort int) ([]byte, error) {
	// kube-apiserver authenticates with a client certificate (logs,
	// exec, port-forward), everyone else with a token it reviews.
	authn := map[string]any{
		"anonymous": map[string]any{"enabled": false},
		"webhook":   map[string]any{"enabled": true},
	}
	if clientCAFile != "" {
		authn["x509"] = map[string]any{"clientCAFile": clientCAFile}
	}
	c := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// kubelet 1.35 refuses cgroup v1 unless told otherwise; the host
		// mounts only v1 controllers (and an empty cgroup2).
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               cgroupRoot,
		"cgroupsPerQOS":            true,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": runtimeEndpoint,
		"podLogsDir":               p.PodLogs,
		"volumePluginDir":          p.VolumePlugins,
		// Only the node's own address, and ports free on this machine.
		"address":            address,
		"port":               port,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        healthzPort,
		"authentication":     authn,
		"authorization":      map[string]any{"mode": "Webhook"},
		// The machine is shared and its disk may be fuller than a node's
		// default eviction thresholds allow: evict only when nearly out.
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"registerNode":                true,
		"nodeStatusUpdateFrequency":   "5s",
		"serializeImagePulls":         false,
		// Tests read containers' whole logs (the canary scan, change
		// logs): no rotation, whose older files kubelet compresses.
		"containerLogMaxSize":  "1Gi",
		"containerLogMaxFiles": 2,
	}
	if clusterDNS != "" {
		c["clusterDNS"] = []string{clusterDNS}
		c["clusterDomain"] = "cluster.local"
	}
	b, err := json.MarshalIndent(c, "", "  ")
	return b, errors.Wrap(err, "cannot render the kubelet config")
}
