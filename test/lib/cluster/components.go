//go:build linux

package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// startControllers starts kube-controller-manager (every default
// controller: ServiceAccounts and their root CA, Deployments, ReplicaSets,
// EndpointSlices, the garbage collector, node lifecycle) and
// kube-scheduler, both serving nothing but their work.
func (c *Cluster) startControllers() error {
	ca := c.path("apiserver", "ca.crt")
	if err := os.WriteFile(ca, c.Kube.Config.CAData, 0o600); err != nil {
		return errors.Wrap(err, "cannot write the cluster CA")
	}
	kcm := proc.New("kube-controller-manager", proc.Command{
		Path: c.opts.Tools.ControllerManager,
		Args: append([]string{
			"--kubeconfig=" + c.Kubeconfig,
			"--controllers=*",
			"--root-ca-file=" + ca,
			"--cluster-cidr=" + c.opts.PodCIDR,
			"--service-cluster-ip-range=" + c.opts.ServiceCIDR,
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		}, nodeMonitorGrace(c.opts.NodeLossGrace)...),
	}, os.Environ(), c.path("logs", "kube-controller-manager.log"), c.log)
	sched := proc.New("kube-scheduler", proc.Command{
		Path: c.opts.Tools.Scheduler,
		Args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		},
	}, os.Environ(), c.path("logs", "kube-scheduler.log"), c.log)
	for _, p := range []*proc.Process{kcm, sched} {
		if err := p.Start(); err != nil {
			return err
		}
		c.procs = append(c.procs, p)
	}
	return nil
}

// nft is the nft command bundled with kube-proxy (hack/tools.sh).
func (c *Cluster) nft() string { return filepath.Join(filepath.Dir(c.opts.Tools.Proxy), "nft") }

// startProxy starts kube-proxy in nftables mode for the node, with the
// bundled nft first in its PATH. It leaves conntrack's sysctls alone and
// opens NodePorts on the node's address only.
func (c *Cluster) startProxy() error {
	hp, err := proc.FreePort()
	if err != nil {
		return err
	}
	mp, err := proc.FreePort()
	if err != nil {
		return err
	}
	cfg, err := proxyConfig(c.Kubeconfig, c.Node.Name(), c.opts.PodCIDR, c.nodeIP, hp, mp)
	if err != nil {
		return err
	}
	file := c.path("kube-proxy.yaml")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		return errors.Wrap(err, "cannot write kube-proxy's config")
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(c.opts.Tools.Proxy)+":"+os.Getenv("PATH"))
	c.proxy = proc.New("kube-proxy", proc.Command{
		Path: c.opts.Tools.Proxy,
		Args: []string{"--config=" + file, "--v=1"},
	}, env, c.path("logs", "kube-proxy.log"), c.log)
	return c.proxy.Start()
}

// cleanupProxy removes kube-proxy's nftables tables.
func (c *Cluster) cleanupProxy() error {
	errs := make([]error, 0, 2)
	for _, fam := range []string{"ip", "ip6"} {
		if run(context.Background(), c.nft(), "list", "table", fam, "kube-proxy") != nil {
			continue
		}
		errs = append(errs, run(context.Background(), c.nft(), "delete", "table", fam, "kube-proxy"))
	}
	return errors.Join(errs...)
}

// proxyConfig renders a KubeProxyConfiguration (JSON, read as YAML).
func proxyConfig(kubeconfig, nodeName, podCIDR, nodeIP string, healthzPort, metricsPort int) ([]byte, error) {
	zero := "0s"
	c := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig},
		"mode":               "nftables",
		"hostnameOverride":   nodeName,
		"clusterCIDR":        podCIDR,
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(healthzPort),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(metricsPort),
		"nodePortAddresses":  []string{nodeIP + "/32"},
		// The machine's conntrack settings are not the cluster's to change.
		"conntrack": map[string]any{
			"maxPerCore":            0,
			"min":                   0,
			"tcpEstablishedTimeout": zero,
			"tcpCloseWaitTimeout":   zero,
		},
	}
	b, err := json.MarshalIndent(c, "", "  ")
	return b, errors.Wrap(err, "cannot render kube-proxy's config")
}
