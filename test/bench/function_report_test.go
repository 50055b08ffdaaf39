//go:build linux

package bench

import (
	"fmt"
	"strings"
	"time"
)

// allocsBeforeAfter is the effect of the allocation work of issue 7 on
// RunFunction: BenchmarkRunFunction run against the code before and after
// the change, measured once on this machine on 2026-11-21 (load average 5
// to 7 on 2 CPUs, other engineers' benchmarks running) and kept here as
// measured. Medians of 5 runs each, before and after alternating.
const allocsBeforeAfter = `| benchmark | ns/op before | after | p50 before | after | B/op before | after | allocs/op before | after |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| NamespacedNew3Keys | 131932 | 108531 | 71 us | 70 us | 30529 | 30009 | 527 | 512 |
| NamespacedReady3Keys | 375134 | 308683 | 235 us | 166 us | 94748 | 79654 | 1494 | 1191 |
| NamespacedReady10Keys | 599995 | 523884 | 444 us | 306 us | 200869 | 170440 | 2995 | 2364 |
| LegacyReady3Keys | 337370 | 273340 | 232 us | 160 us | 89948 | 76466 | 1396 | 1118 |
`

// functionMarkdown writes the section: the in-process benchmarks, the
// allocation work's before and after, and the gRPC comparison.
func functionMarkdown(inproc []inProcess, cmdline string, grpcRes []grpcResult, calls int) string {
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }

	w("## function-widget, in process\n\n")
	w("`%s` (medians of %d runs). RunFunction called directly, with a no-op logger, for a namespaced\n", cmdline, inProcessCount)
	w("XWidget that is new (nothing observed) or ready (Widget, WidgetKeys and connection Secret observed\n")
	w("ready, the XR carrying the conditions and status the function gave it: the steady state every later\n")
	w("reconcile sees), with 3 keys (typical) and 10 (the most the XRD and `v1beta1.MaxKeys` allow; the\n")
	w("issue's \"e.g. 50 keys\" is not possible), and for a ready legacy XWidget with 3 keys. p50 and p99 are\n")
	w("of single calls (each call timed inside the benchmark loop).\n\n")
	w("| benchmark | ns/op | p50 | p99 | B/op | allocs/op | runs |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range inproc {
		w("| %s | %.0f | %s | %s | %.0f | %.0f | %d |\n", r.name, r.nsOp, us(time.Duration(r.p50)), us(time.Duration(r.p99)), r.bytesOp, r.allocs, r.runs)
	}
	w("\n### Allocations in RunFunction, before and after\n\n")
	w("A constant table, not measured by this run: measured on this machine (2 CPUs, load average 5 to 7\n")
	w("from other engineers' benchmarks) on 2026-11-21, before and after the change \"function: read\n")
	w("conditions without a JSON round trip, convert observed resources only when read, share the desired\n")
	w("state of earlier steps instead of cloning it\". The benchmarks above, `-count 1` five times each,\n")
	w("before and after alternating; medians. B/op and allocs/op are exact; ns/op and p50 move with the\n")
	w("load (p99 did, too much to compare, so it is left out).\n\n")
	w("%s\n", allocsBeforeAfter)
	w("What changed, from the CPU and allocation profiles (`-cpuprofile`, `-memprofile` of\n")
	w("NamespacedReady10Keys):\n\n")
	w("- Conditions of each WidgetKey, the Widget and the XR were read with `GetValueInto`, a JSON marshal\n")
	w("  and unmarshal of `status.conditions` per object: about a quarter of the CPU time and a fifth of the\n")
	w("  allocations. They are now read straight from the unstructured content.\n")
	w("- `request.GetObservedComposedResources` converted every observed resource to unstructured content,\n")
	w("  including the connection Secret (whose existence is all the function needs) and the resources of\n")
	w("  other pipeline steps. Resources are now converted when read.\n")
	w("- The desired state of earlier steps was deep-copied (`proto.CloneOf`) so as not to modify the request;\n")
	w("  a shallow copy does the same, since the function never changes a Resource message. The benchmark's\n")
	w("  requests carry the empty desired state Crossplane sends to a pipeline's first step, so this does not\n")
	w("  show above; it saves a copy of every resource earlier steps compose.\n\n")
	w("What remains is the function SDK's own conversions, kept for the typed objects they allow: each\n")
	w("composed resource is built as a typed object and converted with `composed.From` (JSON marshal and\n")
	w("unmarshal) and `structpb.NewStruct`, and each observed resource the function reads with `AsMap`.\n")
	w("There is no per-request scheme or decoder construction (schemes are registered once, in\n")
	w("`NewFunction`).\n\n")

	w("## function-widget vs function-patch-and-transform over gRPC\n\n")
	writeFPTConditions(w, calls)
	w("| scenario | function-widget p50 | p99 | function-patch-and-transform p50 | p99 | ratio p50 | ratio p99 | function-auto-ready p50 | p99 | desired resources |\n")
	w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range grpcRes {
		o, p, f := r.targets[0], r.targets[1], r.targets[2]
		w("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %s | %s | %d |\n", r.scenario,
			us(o.p50), us(o.p99), us(p.p50), us(p.p99),
			float64(o.p50)/float64(p.p50), float64(o.p99)/float64(p.p99),
			us(f.p50), us(f.p99), o.desired)
	}
	w("\nRatios are function-widget / function-patch-and-transform, of the medians over the %d rounds;\n", grpcRounds)
	w("below 1 means function-widget is faster. Per round (p50 / p99, in us):\n\n")
	for _, r := range grpcRes {
		w("- %s:", r.scenario)
		for _, tg := range r.targets {
			w(" %s %s;", tg.name, roundsOf(tg))
		}
		w(" function-patch-and-transform results per call: %d warning(s).\n", r.targets[1].warnings)
	}
	return doc.String()
}

// writeFPTConditions says how the gRPC comparison is run and where the two
// functions' work differs.
func writeFPTConditions(w func(string, ...any), calls int) {
	w("**Peer: function-patch-and-transform v0.5.0, not v0.9.0.** The Go module proxy refuses v0.9.0 (and\n")
	w("v0.8.x, v0.7.x and v0.6.x: 403 for their `.mod` and/or `.zip`); v0.5.0 is the newest version it serves\n")
	w("in full (`bash hack/tools.sh all`, see tools/README.md). v0.5.0 predates Crossplane v2: it is built on\n")
	w("function-sdk-go v0.2.0 and serves only the `v1beta1` RunFunction RPC.\n\n")
	w("**The same XR and observed resources.** Each scenario's observed state (the namespaced XWidget\n")
	w("team-a/web and, when ready, its Widget, WidgetKeys and connection Secret, with the WidgetKeys'\n")
	w("connection details) and empty desired state are identical in both requests; only the input\n")
	w("differs. function-widget gets the examples' WidgetPolicy with `maxKeys` raised to the key count;\n")
	w("function-patch-and-transform gets a `pt.fn.crossplane.io/v1beta1` `Resources` input written to\n")
	w("compose what function-widget composes, as far as P&T can (`ptResources` in test/bench/function_test.go):\n\n")
	w("- `widget`: a `widget.m.widgetco.io/v1alpha1` Widget with function-widget's label and providerConfigRef\n")
	w("  and the policy's defaults in its base; patches from the XR's `spec.size`, `spec.region`,\n")
	w("  `spec.labels` (merged over the default labels), `spec.description` and, combined from its namespace\n")
	w("  and name, the default description; patches back to the XR's `status.endpoint`, `widgetState`,\n")
	w("  `externalName` and `region`; connection details `endpoint` and `widget`; readiness: Ready condition.\n")
	w("- `key-0` ... `key-<N-1>`: N WidgetKeys with the providerConfigRef in their base; the widget's name\n")
	w("  (`spec.forProvider.widgetName`) from the XR's `status.externalName`, `Required`, so that keys wait\n")
	w("  for the widget; description and `writeConnectionSecretToRef.name` from the XR's namespace and name;\n")
	w("  connection details `key-<i>` and `key-<i>-name` from the key's connection secret; readiness: Ready\n")
	w("  condition.\n")
	w("- `connection-secret`: a Secret named from the XR, with `endpoint` and `widget` (base64) from the XR's\n")
	w("  status; its name patched back to `status.connectionSecretName`; readiness: none (ready once it exists).\n\n")
	w("Each response is checked once before timing: no fatal result and, from both, the same number of\n")
	w("desired resources (column \"desired resources\"). Where the work still differs:\n\n")
	w("- **Namespaced XR, connection details.** Crossplane v2 drops the connection details of a namespaced XR.\n")
	w("  function-widget therefore writes the endpoint, widget name and every key into the composed Secret.\n")
	w("  P&T v0.5.0 cannot: patches read object fields, and a WidgetKey's key exists only in its connection\n")
	w("  secret, so it extracts the keys as the XR's connection details (the same extraction work, but\n")
	w("  Crossplane v2 would discard the result) and its Secret holds only the endpoint and widget name.\n")
	w("- **Namespaces and names.** Neither sets a composed resource's namespace; Crossplane v2 puts them in the\n")
	w("  XR's. P&T copies `metadata.name`/`namespace` of each observed resource into its desired one;\n")
	w("  function-widget leaves them to Crossplane.\n")
	w("- **Protocol.** Crossplane v2 calls a function with the `v1` RPC and, on Unimplemented, again with\n")
	w("  `v1beta1`, on every call. Here P&T is called with `v1beta1` directly (the request converted once, by\n")
	w("  protobuf round trip, as Crossplane does), so the extra round trip it would cost is not counted.\n")
	w("- **Work only function-widget does:** validating the XR against the policy (sizes, regions, labels,\n")
	w("  keys, name lengths), gating keys on the widget's readiness (P&T: on its external name reaching the\n")
	w("  XR, one reconcile later), composing exactly `spec.keys` keys (P&T: a fixed set of N templates, so\n")
	w("  one Composition per key count), key readiness from the key's connection details, `status.keysReady`,\n")
	w("  three conditions on the XR and claim with events on transitions (none in the steady state), and a\n")
	w("  TTL chosen from readiness. **Work only P&T does:** JSON-decoding each base template on every call,\n")
	w("  logging two info lines per call, and returning the Composition environment in the context.\n")
	w("- function-auto-ready v0.6.0 gets function-widget's request and composes nothing: the function SDK's\n")
	w("  serving and (un)marshalling floor for that request.\n\n")
	w("All three served on 127.0.0.1 free ports with `--insecure` (output to /dev/null); one gRPC client each,\n")
	w("connection reused; calls one at a time, alternating which function goes first; 200 warm-up calls\n")
	w("each per scenario, then %d rounds of %d calls each. Latency is the client's.\n\n", grpcRounds, calls)
}
