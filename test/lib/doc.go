// Package lib is the project's test library, layered bottom up:
//
//   - wait: polling until a condition holds (Poll, Until, For, ForTrue,
//     Consistently), the one way any tier waits;
//   - proc: binaries built once per run, free loopback ports;
//   - prom: scraping and summing Prometheus metrics;
//   - kube: etcd and kube-apiserver (envtest), with an admin client, and
//     whether a package runs (PackageRunning);
//   - providerenv (on kube, proc): provider-widget's binary against envtest
//     with its CRDs, as the integration suite and the benchmarks run it;
//   - registry: a private OCI registry; audit: kube-apiserver's audit log;
//   - node (on proc): containerd and kubelet on this machine; cluster (on
//     kube, node, registry, audit): a real one-node cluster with Crossplane
//     from its Helm chart;
//   - widgetserver: the reference Widget API in the test's process; leaks:
//     secrets where they must not be; diagnostics: a failed run's dump;
//   - platform (on a cluster): the packages, ProviderConfig and
//     Compositions a platform team installs on it;
//   - doccmd: the commands of the user pages, which make demo's test runs.
//
// Every tier - the provider integration suite, the e2e suite, make demo and
// the benchmarks - uses these instead of writing its own.
package lib
