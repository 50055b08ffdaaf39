// Package lib is the project's test library, layered bottom up:
//
//   - wait: polling until a condition holds (Poll, For, Consistently);
//   - proc: binaries built once per run, free loopback ports;
//   - prom: scraping and summing Prometheus metrics;
//
// with the local control plane (test/harness) and the packages and objects
// a platform installs (test/e2e/platform) on top. Every tier - the provider
// integration suite, the e2e suite, make demo and the benchmarks - uses
// these instead of writing its own.
package lib
