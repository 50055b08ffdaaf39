//go:build linux

package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// driftDoc writes the section.
func driftDoc(t *testing.T, rs []driftRun, n int, poll time.Duration, runs, leftover int, load0 string) string {
	t.Helper()
	var doc strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&doc, format, a...) }
	jitter := poll / 10
	flags := func(r driftRun) string {
		return strings.Join(append([]string{"--metrics-bind-address <free port> --health-probe-bind-address 0"}, r.args[4:]...), " ")
	}
	var feedArgs, pollArgs, feedPoll string
	for _, r := range rs {
		if r.feed {
			feedArgs, feedPoll = flags(r), r.poll
		} else {
			pollArgs = flags(r)
		}
	}

	w("## provider-widget: drift repair, %d out-of-band changes\n\n", n)
	w("The provider section's envtest; per mode and run a fresh reference Widget API (in the test process, **zero\n")
	w("provisioning and resize delay, no rate limit**), namespace and provider process. %d Widgets (size %s,\n", n, driftDesired)
	w("label team=a) are created and all Ready, then after a %s pause each widget is changed **out of band**: a\n", driftSettle)
	w("PATCH of its size to %s through the Widget API Go client with the project's token, as someone resizing it\n", driftOutOfBnd)
	w("by hand would. A change is **repaired** when the provider's restoring write (a conditional PUT back to %s)\n", driftDesired)
	w("commits: the bench follows the project's change feed with a client-side `widgetapi.Follower` and takes the\n")
	w("widget's first `widget.updated` entry with a higher generation than the change's (nobody else writes).\n")
	w("**Latency** is that entry's time minus the change's commit time, both from the API server's clock, so neither\n")
	w("the bench's PATCH round trip nor its follower's delay is included. At the end a List checks that every widget\n")
	w("is back to size %s, team=a and Ready.\n\n", driftDesired)
	w("- **change feed**: the provider's defaults (feed on, poll interval %s): `%s`.\n", feedPoll, feedArgs)
	w("- **polling only**: `%s`, poll jitter left at its default of a tenth of the interval (±%s).\n", pollArgs, jitter)
	w("  A change is found at the widget's next poll, at a uniformly random point of a %s ± %s cycle: the expected\n", poll, jitter)
	w("  latency is about half the interval (mean ≈ %s) and at most the interval plus the jitter (%s), plus one reconcile.\n", secs(poll/2), secs(poll+jitter))
	w("- **spread**: the %d changes in random order (fixed seed per run), evenly over one poll interval (%s, %.1f\n", n, poll, float64(n)/poll.Seconds())
	w("  changes/s), so that with polling each change lands at a uniformly random point of its widget's poll cycle even\n")
	w("  though the cycles are in step (the Widgets were created together). Both modes get the same schedule.\n")
	w("- **burst**: all %d changes at once from %d concurrent clients, change feed only (with polling the outcome would\n", n, driftWorkers)
	w("  depend only on where the burst falls in the synchronised poll cycles); it runs on the same Widgets after the\n")
	w("  spread phase.\n\n")
	w("Counters are the provider's own over the window from the first change to the last repair plus %s: reconciles\n", driftSettle)
	w("(`controller_runtime_reconcile_total`, all controllers; errors in brackets), Widget API requests it made\n")
	w("(`widget_api_requests_total`, retries and change feed long polls included, the bench's own excluded), its\n")
	w("kube-apiserver requests (`rest_client_requests_total`), the drift repairs it counted (`widget_updates_total{cause=\"drift\"}`)\n")
	w("and the Widgets the change feed queued (and skipped as already seen, `widget_feed_skips_total`, when the\n")
	w("provider has that counter). \"Widgets not Ready after\" counts the Widgets whose Ready condition is not True\n")
	w("at the end of the window (%s after the last repair): the repair is a resize, so the provider's PUT returns the\n", driftSettle)
	w("widget Resizing and the Widget shows Ready=False until the provider reads the widget again, even though the API\n")
	w("finishes resizing at once; \"all Ready again\" is the time from the last repair until every Widget is Ready=True\n")
	w("again (checked every 200 ms). With polling, the window also holds the polls every Widget gets anyway: about\n")
	w("N × window / interval GETs and reconciles that would happen without any drift.\n\n")
	if leftover > 0 {
		w("%d Widgets left by earlier sections (whose Widget API servers are gone) were deleted first, so that the\n", leftover)
		w("provider reconciles only this section's. Load average at the start of the section: %s; %d run(s).\n\n", load0, runs)
	} else {
		w("Load average at the start of the section: %s; %d run(s).\n\n", load0, runs)
	}

	w("| run | mode | changes | sending took | p50 | p90 | p99 | max | mean | not repaired | window | reconciles (errors) | Widget API requests | per change | kube-apiserver requests | drift repairs | feed enqueues (skips) | Widgets not Ready after | all Ready again | reconciles put off for a stale cache |\n")
	w("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	type key struct{ mode, pattern string }
	p50s, p99s := map[key][]time.Duration{}, map[key][]time.Duration{}
	var keys []key
	for _, r := range rs {
		for _, p := range r.phases {
			d := p.delta
			w("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %.0f (%.0f) | %.0f | %.1f | %.0f | %.0f | %.0f (%.0f) | %d | %s | %.0f |\n",
				r.run+1, r.mode(), p.pattern, secs(p.sendFor), lat(quantile(p.latency, .5)), lat(quantile(p.latency, .9)),
				lat(quantile(p.latency, .99)), lat(quantile(p.latency, 1)), lat(mean(p.latency)), p.missing, secs(p.window),
				d.reconciles, d.errors, d.api, d.api/float64(n), d.kube, d.drift, d.enqueues, d.skips, p.unready, readyIn(p.readyIn), d.deferred)
			kk := key{r.mode(), p.pattern}
			if _, ok := p50s[kk]; !ok {
				keys = append(keys, kk)
			}
			p50s[kk] = append(p50s[kk], quantile(p.latency, .5))
			p99s[kk] = append(p99s[kk], quantile(p.latency, .99))
		}
	}
	if runs > 1 {
		for _, kk := range keys {
			w("| median | %s | %s | | %s | | %s | | | | | | | | | | | | |\n", kk.mode, kk.pattern, lat(medianD(p50s[kk])), lat(medianD(p99s[kk])))
		}
	}
	wrong := 0
	for _, r := range rs {
		wrong += r.wrong
		w("\nTime from the first create to all %d Widgets Ready (run %d, %s): %s.", n, r.run+1, r.mode(), secs(r.ready))
	}
	w("\n\nAt the end, %d widget(s) were not back to the desired state.\n", wrong)
	driftFloorDoc(w, rs)

	// Requests by operation, last run.
	last := rs[len(rs)-len(rs)/runs:]
	ops := map[string]bool{}
	var cols []string
	for _, r := range last {
		for _, p := range r.phases {
			cols = append(cols, r.mode()+", "+p.pattern)
			for op := range p.delta.ops {
				ops[op] = true
			}
		}
	}
	w("\nWidget API requests by the provider in the window (last run), by operation, per change:\n\n| operation | %s |\n| --- |%s\n", strings.Join(cols, " | "), strings.Repeat(" ---: |", len(cols)))
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		w("| %s |", op)
		for _, r := range last {
			for _, p := range r.phases {
				w(" %.2f |", p.delta.ops[op]/float64(n))
			}
		}
		w("\n")
	}
	w("\nA change needs one GET and one PUT. With the change feed, GETs above one per change are reconciles queued\n")
	w("by the feed entries that follow it: the widget's Resizing→Ready state changes (one after the out-of-band\n")
	w("resize, one after the repair) and the provider's own restoring write, unless the provider skips versions it\n")
	w("has already seen. \"list changes\" are the provider's change feed long polls, which return at each new entry.\n")
	return doc.String()
}

// driftFloorDoc compares each change feed run's burst with the same burst
// repaired without the provider (floorBurst), when the runs measured it.
func driftFloorDoc(w func(string, ...any), rs []driftRun) {
	var with []driftRun
	for _, r := range rs {
		if r.floor != nil {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return
	}
	w("\n**The machine's floor for the burst.** After its phases, each change feed run stops the provider and sends\n")
	w("the same burst again (all Widgets, %d clients); a minimal repairer in the bench process repairs it instead: it\n", driftWorkers)
	w("learns of each change when the change's PATCH returns (no change feed, cache, queue or rate limit) and does the\n")
	w("least a repair needs, a GET and a conditional PUT of the widget and one status write of the Widget, %d at once\n", floorWorkers)
	w("(the provider's concurrent reconciles). Latency as above.\n\n")
	w("| run | | sending took | p50 | p99 | max | not repaired | first change to last repair |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range with {
		for _, p := range r.phases {
			if p.burst {
				w("| %d | provider | %s | %s | %s | %s | %d | %s |\n", r.run+1, secs(p.sendFor), lat(quantile(p.latency, .5)), lat(quantile(p.latency, .99)), lat(quantile(p.latency, 1)), p.missing, secs(p.window))
			}
		}
		f := r.floor
		w("| %d | minimal repairer | %s | %s | %s | %s | %d | %s |\n", r.run+1, secs(f.sendFor), lat(quantile(f.latency, .5)), lat(quantile(f.latency, .99)), lat(quantile(f.latency, 1)), f.missing, secs(f.window))
	}
}

// lat formats a latency: milliseconds below a second, else seconds.
func lat(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return secs(d)
}

// readyIn formats a phase's readyIn.
func readyIn(d time.Duration) string {
	if d < 0 {
		return "not within the timeout"
	}
	return secs(d)
}
