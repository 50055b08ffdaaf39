//go:build linux

package bench

import (
	"fmt"
	"path/filepath"
	"strings"
)

// What the report calls the run's objects: claims, or, when the run created
// several kinds, objects.

func (r *e2eRun) unit() string {
	if r.mixed() {
		return "object"
	}
	return r.kinds[0].kind.noun
}

func (r *e2eRun) many() string {
	if r.mixed() {
		return "objects"
	}
	return r.kinds[0].kind.many
}

// counts counts the run's objects by kind, e.g. "20 claims and 20 XWidgets".
func (r *e2eRun) counts() string {
	parts := make([]string, 0, len(r.kinds))
	for _, k := range r.kinds {
		parts = append(parts, fmt.Sprintf("%d %s", k.n, k.kind.many))
	}
	return strings.Join(parts, " and ")
}

// warmups names the warm-up objects, e.g. "the warm-up claim".
func (r *e2eRun) warmups() string {
	nouns := make([]string, 0, len(r.kinds))
	for _, k := range r.kinds {
		nouns = append(nouns, k.kind.noun)
	}
	return "the warm-up " + strings.Join(nouns, " and ")
}

// compositions describes the Compositions of the run's kinds.
func (r *e2eRun) compositions(root string) string {
	parts := make([]string, 0, len(r.kinds))
	for _, k := range r.kinds {
		dir := filepath.Dir(k.kind.example)
		parts = append(parts, dir+" Composition: one function-widget step"+compositionTTL(root, dir))
	}
	return strings.Join(parts, "; ")
}

// writeMixedRun describes a run of claims and XWidgets.
func (r *e2eRun) writeMixedRun(w func(string, ...any)) {
	c, x := r.kinds[0], r.kinds[1]
	w("Each run: one warm-up claim and one warm-up XWidget go to Ready first (cold, which includes core starting its\n")
	w("watches of the composed kinds and dialling the function). Then %d `WidgetClaim`s, `examples/composition/legacy/claim.yaml`\n", c.n)
	w("renamed (small widget in eu-west-1, one access key, its own connection Secret), and %d namespaced `XWidget`s,\n", x.n)
	w("`examples/composition/namespaced/xr.yaml` renamed (medium widget in the Composition's default region, %d access keys,\n", x.kind.keys)
	w("a connection Secret named after it), claims and XWidgets in turn, are created in one namespace by %d concurrent\n", e2eWorkers)
	w("clients; watches record when each claim and XWidget is first Synced=True and Ready=True, and when a claim's XR and\n")
	w("the Widget and WidgetKeys composed for each object appear and become Ready. Time-to-Ready is from the object's\n")
	w("create request to that watch event.")
}

// writeKindsTable writes a row per run and kind: time-to-Ready, the work
// per object that the counters tell apart by kind, and what happened after
// all objects were Ready.
func writeKindsTable(w func(string, ...any), rs []*e2eRun) {
	w("By kind. All Ready is from the first create to the kind's last object Ready. RunFunction calls are those\n")
	w("function-widget handled for the kind's XRs (`function_widget_compositions_total` by `flavour`); XR watch events\n")
	w("are the watch events core mapped to one of them (`circuit_breaker_events_total` of the kind's composite controller:\n")
	w("the XR's own and its composed resources'). After all Ready: Ready lost by an object or its XR, as the watches saw\n")
	w("it, until the end of the steady-state window; circuit breaker opens and RunFunction calls in that window.\n\n")
	w("| run | kind | created | Ready | all Ready | time-to-Ready p50 | p90 | p99 | max | RunFunction calls/object | XR watch events/XR | after all Ready: Ready lost | circuit breaker opens | RunFunction calls/min |\n")
	w("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for i, r := range rs {
		for _, k := range r.kinds {
			per := func(v float64) float64 { return v / float64(max(k.n, 1)) }
			w("| %d | %s | %d | %d | %s | %s | %s | %s | %s | %.1f | %.1f | %d | %.0f | %.0f |\n", i+1, k.kind.name, k.n, k.ready, secs(k.allReady),
				secs(quantile(k.toReady, .5)), secs(quantile(k.toReady, .9)), secs(quantile(k.toReady, .99)), secs(quantile(k.toReady, 1)),
				per(k.kind.runFunctionCalls(r.fn)), per(k.kind.xrEvents(r.core, "")),
				k.lostAfter, k.kind.breakerOpens(r.coreSty), k.kind.runFunctionCalls(r.fnSty)/max(r.steady.Minutes(), 1e-9))
		}
	}
	w("\n")
}

// writeKindWork writes the work by kind during the run, from the counters
// that tell the kinds apart.
func (r *e2eRun) writeKindWork(w func(string, ...any)) {
	w("Work by kind during the run, from the counters that tell the kinds apart: per object of the kind unless it says\n")
	w("\"in all\". The Widget API counts its requests by route, not by widget, and the clients' requests to kube-apiserver for\n")
	w("Secrets, Events and leases are shared: those are per object, over both kinds, above (one Widget per object).\n\n")
	heads := make([]string, 0, len(r.kinds))
	for _, k := range r.kinds {
		heads = append(heads, k.kind.many)
	}
	w("| what | %s | source |\n| --- |%s --- |\n", strings.Join(heads, " | "), strings.Repeat(" ---: |", len(r.kinds)))
	row := func(what, format, source string, v func(k *kindRun) float64) {
		cells := make([]string, 0, len(r.kinds))
		for _, k := range r.kinds {
			cells = append(cells, fmt.Sprintf(format, v(k)))
		}
		w("| %s | %s | %s |\n", what, strings.Join(cells, " | "), source)
	}
	per := func(f func(k *kindRun) float64) func(k *kindRun) float64 {
		return func(k *kindRun) float64 { return f(k) / float64(max(k.n, 1)) }
	}
	row("RunFunction calls", "%.1f", "function-widget `function_widget_compositions_total` by `flavour` (Legacy, Namespaced)",
		per(func(k *kindRun) float64 { return k.kind.runFunctionCalls(r.fn) }))
	row("XR watch events", "%.1f", "core `circuit_breaker_events_total` of the kind's composite controller",
		per(func(k *kindRun) float64 { return k.kind.xrEvents(r.core, "") }))
	row("&nbsp; dropped by an open circuit breaker", "%.1f", "`result=\"Dropped\"`",
		per(func(k *kindRun) float64 { return k.kind.xrEvents(r.core, "Dropped") }))
	row("circuit breaker opens, in all", "%.0f", "core `circuit_breaker_opens_total`",
		func(k *kindRun) float64 { return k.kind.breakerOpens(r.core) })
	row("core reconciles", "%.1f", "core `controller_runtime_reconcile_total` of the kind's claim and composite controllers",
		per(func(k *kindRun) float64 { return k.kind.coreReconciles(r.core) }))
	row("provider reconciles", "%.1f", "provider `controller_runtime_reconcile_total` of the kind's managed resource controllers",
		per(func(k *kindRun) float64 { return k.kind.providerReconciles(r.prov) }))
	if len(r.apisrv.after) > 0 {
		row("kube-apiserver requests to the kind's API groups, all clients", "%.1f", "kube-apiserver `apiserver_request_total` by `group` ("+r.groups()+")",
			per(func(k *kindRun) float64 { return k.kind.apiRequests(r.apisrv) }))
	}
	row("Ready lost by the object or its XR, in all", "%.0f", "the benchmark's watches, until the end of the steady-state window",
		func(k *kindRun) float64 { return float64(k.flaps[k.kind.final] + k.flaps[stXRReady]) })
	w("\n")
}

// groups lists the API groups of each kind, e.g. "claims: a, b; XWidgets: c, d".
func (r *e2eRun) groups() string {
	parts := make([]string, 0, len(r.kinds))
	for _, k := range r.kinds {
		parts = append(parts, k.kind.many+": "+strings.Join(k.kind.groups, ", "))
	}
	return strings.Join(parts, "; ")
}
