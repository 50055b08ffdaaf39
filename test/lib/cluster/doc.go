// Package cluster runs a real one-node Kubernetes cluster on this machine
// for tests: etcd and kube-apiserver (test/lib/kube) on the node's address,
// kube-controller-manager, kube-scheduler, a node (test/lib/node: kubelet,
// containerd, runc, a CNI bridge), kube-proxy in nftables mode, CoreDNS as a
// pod, and a private registry (test/lib/registry) that containerd and pods
// pull from with a pull Secret, as from any private registry.
// InstallCrossplane then installs Crossplane from its own Helm chart; the
// package methods install and upgrade Providers, Functions and
// Configurations and wait for their pods; Runtime and Pod kill, freeze and
// reach a package's pods; an audit log, an archive of every container's
// log, the projected tokens and diagnostics show what happened.
//
// Every address is on the bridge the cluster creates (the node's, the
// pods', the Services' through kube-proxy) or on loopback: nothing is
// reachable from off the machine. It needs root, cgroup v1 and overlayfs
// (node.Check) and the binaries `bash hack/tools.sh node` builds
// (ToolsFromEnv). Stop removes what Start created, and Leftovers says what
// is still there.
//
// Options.Nodes runs further nodes on the same machine, each a kubelet with
// its own containerd, bridge, pod range and cgroup root; StopNode stops
// one as a lost machine would (the node-loss bench).
//
// Connect reaches a cluster this package did not start (kind, a real one)
// by its kubeconfig and a registry it pulls from: what goes through the API
// works the same there, and what needs the node returns ErrNotLocal.
//
// The package builds on Linux only; elsewhere it is empty.
package cluster
