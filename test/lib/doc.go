// Package lib is the project's test library, layered bottom up:
//
//   - wait: polling until a condition holds (Poll, For, Consistently);
//   - proc: binaries built once per run, free loopback ports;
//   - prom: scraping and summing Prometheus metrics;
//   - test/harness (beside lib, on wait and proc): the local control plane;
//   - platform (on the harness): the packages, ProviderConfig and
//     Compositions a platform team installs on it.
//
// Every tier - the provider integration suite, the e2e suite, make demo and
// the benchmarks - uses these instead of writing its own.
package lib
