// Package node runs a real Kubernetes node on this machine for tests:
// containerd (CRI, overlayfs, runc) and kubelet, registered with a
// kube-apiserver the caller runs, with pods on a CNI bridge of their own.
//
// Everything the node writes lives under one directory, except what
// containerd, kubelet and the CNI plugins fix (MachinePaths: the shims'
// sockets in /run/containerd/s, kubelet's device plugin socket, libcni's
// cache, the container log links in /var/log/containers), a few sysctls,
// the pods' cgroups (under a cgroup root of the node's own) and the bridge
// link. Stop removes or restores all of them, and Leftovers
// says what is still there. It needs root, cgroup v1 and overlayfs (Check),
// and the binaries `bash hack/tools.sh node` builds (ToolsFromEnv).
//
// The package builds on Linux only; elsewhere it is empty.
package node
