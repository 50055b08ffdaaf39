// Package node_test runs the platform on a real one-node cluster
// (test/lib/cluster): Crossplane installed from its Helm chart, the
// packages installed by its package manager from the cluster's registry and
// run by kubelet, the reference Widget API on the node's address. Opt-in
// (E2E_NODE=1, as root, after `bash hack/tools.sh node`).
package node_test
