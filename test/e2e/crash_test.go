//go:build linux

package e2e_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// crashXRs is how many XWidgets TestProviderCrashDuringCreates creates.
const crashXRs = 5

// TestProviderCrashDuringCreates kills provider-widget (SIGKILL, both
// replicas' containers) while it is creating widgets - the Widget API holds
// the responses to its writes, so some creates have happened without the
// provider knowing - and kubelet starts it again: every XWidget goes Ready
// with exactly one widget and one key.
func TestProviderCrashDuringCreates(t *testing.T) {
	needsNode(t, "kills provider-widget's processes")
	s := newScenario(t, false)
	prov := suite.provider
	defer suite.widgets.Server.SetFaults(server.Faults{})
	// Every write is committed at once but answered only after this long.
	suite.widgets.Server.SetFaults(server.Faults{HoldWriteResponse: 3 * time.Second})

	xrs := make([]*unstructured.Unstructured, 0, crashXRs)
	for i := range crashXRs {
		xr := s.xwidget(fmt.Sprintf("crash-%d", i), map[string]any{"keys": int64(1)})
		s.create(xr)
		xrs = append(xrs, xr)
	}
	s.eventually("the provider's first creates committed in the Widget API", func() error {
		ws, err := s.scenarioWidgets()
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return errors.New("no widget of the scenario in the Widget API yet")
		}
		return nil
	})
	if err := prov.Kill(); err != nil {
		t.Fatalf("cannot kill the provider: %v", err)
	}
	ws, _ := s.scenarioWidgets()
	t.Logf("Killed provider-widget (SIGKILL) with %d of %d widgets created and their create responses held back", len(ws), crashXRs)
	suite.widgets.Server.SetFaults(server.Faults{})
	restarted := time.Now()

	for _, xr := range xrs {
		s.waitReady(xr)
	}
	t.Logf("TIMING: all %d XWidgets Ready %s after the provider was killed (kubelet restarted it)", crashXRs, time.Since(restarted).Round(100*time.Millisecond))

	ws, err := s.scenarioWidgets()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]widgetapi.Widget{}
	for _, w := range ws {
		byName[w.Name] = w
	}
	if len(ws) != crashXRs {
		t.Errorf("Widget API holds %d widgets for %d XWidgets, want exactly one each: %v", len(ws), crashXRs, keys(byName))
	}
	for _, xr := range xrs {
		name := status(xr, "externalName")
		if _, ok := byName[name]; !ok {
			t.Errorf("XWidget %s's widget %q is not among the scenario's widgets %v", xr.GetName(), name, keys(byName))
			continue
		}
		if k, err := s.keyNames(name); err != nil || len(k) != 1 {
			t.Errorf("widget %s has keys %v (error %v), want exactly 1", name, k, err)
		}
	}
}

// TestFunctionCrash freezes function-widget (SIGSTOP: a hung process),
// changes an XWidget while it is down - kubelet's readiness probe fails and
// Crossplane reports the Function unhealthy - and lets it run again: the
// XWidget converges to the change.
func TestFunctionCrash(t *testing.T) {
	needsNode(t, "freezes function-widget's processes")
	s := newScenario(t, false)
	fn := suite.function
	defer func() { _ = fn.Thaw() }()
	xr := s.xwidget("fn-crash", map[string]any{"size": "small", "keys": int64(1)})
	s.create(xr)
	s.waitReady(xr)
	name := status(xr, "externalName")

	if err := fn.Freeze(); err != nil {
		t.Fatalf("cannot freeze the function: %v", err)
	}
	frozen := time.Now()
	s.eventually("Function reported unhealthy", func() error { return functionHealthy(s, corev1.ConditionFalse) })
	t.Logf("TIMING: Function unhealthy %s after it hung (readiness probe every 10s, 3 failures)", time.Since(frozen).Round(100*time.Millisecond))
	// Crossplane calls functions with gRPC's wait-for-ready and a deadline:
	// the reconcile this change triggers waits for the function (up to
	// core's 2 minute reconcile timeout, after which the XWidget shows
	// Synced=False with DeadlineExceeded) rather than failing at once.
	s.mergePatch(xr, `{"spec":{"size":"medium"}}`)
	if err := s.widgetState(name, widgetapi.SizeSmall); err != nil {
		t.Errorf("the widget changed while the function was down: %v", err)
	}
	if err := fn.Thaw(); err != nil {
		t.Fatalf("cannot let the function run again: %v", err)
	}
	restarted := time.Now()
	s.eventually("XWidget converged after the function ran again", func() error {
		if err := s.widgetState(name, widgetapi.SizeMedium); err != nil {
			return err
		}
		if err := s.get(xr); err != nil {
			return err
		}
		return isReady(xr)
	})
	t.Logf("TIMING: XWidget converged %s after the function ran again", time.Since(restarted).Round(100*time.Millisecond))
	s.eventually("Function reported healthy", func() error { return functionHealthy(s, corev1.ConditionTrue) })
}

// functionHealthy returns nil when the Function's Healthy condition has the
// given status.
func functionHealthy(s *scenario, want corev1.ConditionStatus) error {
	f := &pkgv1.Function{}
	if err := suite.c.Client().Get(s.ctx, types.NamespacedName{Name: platform.FunctionName}, f); err != nil {
		return err
	}
	if c := f.GetCondition(pkgv1.TypeHealthy); c.Status != want {
		return errors.Errorf("Function %s Healthy=%s (%s), want %s", f.Name, c.Status, c.Message, want)
	}
	return nil
}

func keys(m map[string]widgetapi.Widget) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
