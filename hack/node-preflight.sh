#!/usr/bin/env bash
# hack/node-preflight.sh - what `make test`, `make e2e` and `make demo`
# check before they build or start anything: the machine can run the real
# one-node cluster (test/lib/cluster) - root, the cgroup v1 memory
# controller, overlayfs and the ip command, as test/lib/node's Check
# requires. It names what is missing and how to go on without it.
# E2E_NODE=0 skips the check (and make test then leaves the real-node tests
# out).
set -euo pipefail

if [[ ${E2E_NODE:-1} == 0 ]]; then
	exit 0
fi
missing=()
if [[ $(id -u) != 0 ]]; then
	missing+=("root (kubelet, containerd and runc need it)")
fi
if [[ ! -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]]; then
	missing+=("the cgroup v1 memory controller at /sys/fs/cgroup/memory")
fi
if ! grep -q $'\toverlay$' /proc/filesystems 2>/dev/null; then
	missing+=("overlayfs (containerd's snapshotter)")
fi
if ! command -v ip >/dev/null; then
	missing+=("the ip command (Debian package iproute2)")
fi
if ((${#missing[@]} == 0)); then
	exit 0
fi
{
	printf 'node-preflight: %s runs a real one-node Kubernetes cluster on this machine, which lacks:\n' "${1:-this target}"
	printf '  - %s\n' "${missing[@]}"
	printf 'Run it as root on a machine with cgroup v1 and overlayfs'
	if [[ ${1:-} == "make test" ]]; then
		printf ', or leave the real-node tests out: make test E2E_NODE=0'
	fi
	printf '.\n'
	if [[ ${1:-} != "make demo" ]]; then
		printf 'Or run the end-to-end suite against a cluster of your own (kind, say), which needs none of these: make e2e-cluster (docs/development.md).\n'
	fi
} >&2
exit 1
