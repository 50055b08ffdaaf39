//go:build linux

package e2e_test

import (
	"os"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/upstream/staleconditions"
)

// TestUpstreamStaleConditions runs the reproduction for the upstream report
// (test/upstream/staleconditions): 60 XRs whose Composition runs only
// function-patch-and-transform, composing one ConfigMap each, created at
// once by 8 clients. It fails when any XR loses Ready after its first Ready,
// while converging or in 30 s after all are Ready, which is what Crossplane
// core v2.4.2's stale conditions (docs/convergence.md) cause with core's
// default of 100 concurrent reconciles. It runs only with
// E2E_UPSTREAM_REPRO=1 and FUNCTION_PATCH_AND_TRANSFORM_BIN (`bash
// hack/tools.sh function-patch-and-transform`); E2E_CORE_ARGS=none runs core
// with its defaults.
func TestUpstreamStaleConditions(t *testing.T) {
	if os.Getenv("E2E_UPSTREAM_REPRO") == "" {
		t.Skip("the upstream reproduction runs only with E2E_UPSTREAM_REPRO=1")
	}
	s := newScenario(t, false)
	bin := os.Getenv("FUNCTION_PATCH_AND_TRANSFORM_BIN")
	if bin == "" {
		t.Fatal("FUNCTION_PATCH_AND_TRANSFORM_BIN is unset: run `bash hack/tools.sh function-patch-and-transform` and eval \"$(bash hack/tools.sh env)\"")
	}
	xpkg, err := platform.BuildFunction(s.ctx, suite.crank, t.TempDir(), "function-patch-and-transform", bin)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := suite.c.PushPackage(s.ctx, xpkg, platform.Org+"/function-patch-and-transform:v0.5.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := suite.c.InstallFunction(s.ctx, "function-patch-and-transform", ref, ""); err != nil {
		t.Fatal(err)
	}
	if err := staleconditions.Apply(s.ctx, suite.kube); err != nil {
		t.Fatal(err)
	}
	o := staleconditions.Options{Namespace: s.ns, N: 60, Clients: 8, Quiet: convergenceQuiet, Timeout: 5 * time.Minute}
	res, err := staleconditions.Run(s.ctx, suite.c.RESTConfig(), suite.kube, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURED upstream reproduction (core flags %q): %d XRepros (function-patch-and-transform only, one ConfigMap each) Ready %s after the first create; %d losses of Ready on %d XRs until %s after all were Ready, %d of them after",
		coreArgs(), res.N, res.ReadyAfter.Round(100*time.Millisecond), len(res.Losses), res.LostXRs(), o.Quiet, res.LostAfterAllReady())
	for _, l := range res.Losses {
		t.Errorf("XRepro %s lost Ready at %s (%s): %s", l.Name, l.At.Format(time.RFC3339Nano), l.Reason, l.Message)
	}
}
