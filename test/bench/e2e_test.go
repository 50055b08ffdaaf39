//go:build linux

package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func init() { register(40, "e2e", e2eSection) }

// Knobs and fixed conditions of the end-to-end run.
const (
	e2eToken     = "bench-token"
	e2eNamespace = "bench-e2e"
	e2eWarmupNS  = "bench-e2e-warmup"
	e2eWorkers   = 4
	// e2eWait bounds the wait for all claims: past it the section reports
	// how far they got instead of failing.
	e2eWait = 10 * time.Minute
	// e2eIdle is the window before the claims in which each process's idle
	// CPU use is measured.
	e2eIdle = 10 * time.Second
)

// The kinds the run watches: the app team's claim, the legacy XR it binds
// and the cluster-scoped managed resources the function composes; and the
// app team's namespaced XR and the namespaced managed resources composed
// for it.
var (
	gvkClaim      = schema.GroupVersionKind{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Kind: "WidgetClaim"}
	gvkLegacyXR   = schema.GroupVersionKind{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Kind: "XWidget"}
	gvkWidget     = schema.GroupVersionKind{Group: "widget.widgetco.io", Version: "v1beta1", Kind: "Widget"}
	gvkWidgetKey  = schema.GroupVersionKind{Group: "widget.widgetco.io", Version: "v1beta1", Kind: "WidgetKey"}
	gvkXWidget    = schema.GroupVersionKind{Group: "platform.widgetco.io", Version: "v1alpha1", Kind: "XWidget"}
	gvkWidgetM    = schema.GroupVersionKind{Group: "widget.m.widgetco.io", Version: "v1beta1", Kind: "Widget"}
	gvkWidgetKeyM = schema.GroupVersionKind{Group: "widget.m.widgetco.io", Version: "v1beta1", Kind: "WidgetKey"}
)

// The stages of a claim, in order, from its create request to Ready, and
// the last stage of a namespaced XWidget (which has no claim and is its own
// XR). An object with several WidgetKeys reaches a WidgetKey stage when all
// of them have.
const (
	stXR           = "XR created"
	stWidget       = "Widget created"
	stWidgetReady  = "Widget Ready"
	stKey          = "WidgetKey created"
	stKeyReady     = "WidgetKey Ready"
	stXRReady      = "XR Ready"
	stReady        = "claim Ready"
	stXWidgetReady = "XWidget Ready"
)

var e2eStages = []string{stXR, stWidget, stWidgetReady, stKey, stKeyReady, stXRReady, stReady}

// e2ePath is the order in which a claim's stages happen: each follows the
// one before it. A WidgetKey's Ready follows its creation but is off the
// path (the function waits for the key's connection details, not for its
// Ready condition).
var e2ePath = []string{stXR, stWidget, stWidgetReady, stKey, stXRReady, stReady}

// e2eSection: N claims (or, with WIDGET_BENCH_E2E_MIX=half, claims and
// namespaced XWidgets) to Ready on a real one-node cluster
// (test/lib/cluster, as the e2e suite and make demo run it), with the CPU time every process
// of the control plane spends on them.
func e2eSection(t *testing.T, b *bench) string {
	n := envInt("WIDGET_BENCH_E2E_N", 100)
	runs := envInt("WIDGET_BENCH_E2E_RUNS", 1)
	steady := time.Duration(envInt("WIDGET_BENCH_E2E_STEADY_SECONDS", 60)) * time.Second
	mix := e2eMix(t)
	variants := e2eVariants(t, mix)
	// controller-runtime's clients log API warnings through its logger.
	ctrllog.SetLogger(logr.Discard())
	vrs := make([]*variantRuns, 0, len(variants))
	for _, v := range variants {
		vrs = append(vrs, &variantRuns{v: v})
	}
	for i := range runs {
		// A fresh control plane each run and variant, so that runs are
		// alike and no variant inherits another's objects, watches or
		// queues.
		for _, v := range variantOrder(variants, i) {
			vr := vrs[slices.IndexFunc(vrs, func(vr *variantRuns) bool { return vr.v == v })]
			env := startE2EWith(t, b, v.functionPackage(t))
			env.variant = v
			if v.install != nil {
				v.install(t.Context(), t, env)
			}
			r := env.run(t, n, steady, mix)
			env.stop()
			logRun(t, v, i, n, r)
			if r.mixed() {
				for _, k := range r.kinds {
					t.Logf("e2e run %d: %s %d of %d Ready in %s, p50 %s, p99 %s", i+1, k.kind.many, k.ready, k.n, k.allReady.Round(10*time.Millisecond),
						quantile(k.toReady, .5).Round(10*time.Millisecond), quantile(k.toReady, .99).Round(10*time.Millisecond))
				}
			}
			vr.runs, vr.env = append(vr.runs, r), env
		}
	}
	// The details are the first variant's, as the section wrote them before
	// variants; the others are in the side-by-side table.
	doc := e2eMarkdown(t, b, vrs[0].env, vrs[0].runs)
	if len(vrs) > 1 || vrs[0].v != variantWidget {
		var tbl strings.Builder
		w := func(format string, a ...any) { fmt.Fprintf(&tbl, format, a...) }
		writeVariantsTable(w, vrs)
		writeLossWindows(w, vrs)
		writeVariantsPlot(t, b, w, vrs)
		doc += tbl.String()
	}
	return doc
}
