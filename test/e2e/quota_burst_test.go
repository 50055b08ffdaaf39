//go:build linux

package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// TestQuotaBurst applies 50 XWidgets at once under quotas.widgets: 1 and
// counts the widgets the Widget API holds for them: exactly one, however
// core's reconciles of the 50 interleave. The other 49 are refused with
// QuotaExceeded and compose nothing (docs/policy.md#the-quota-race).
func TestQuotaBurst(t *testing.T) {
	s := newScenario(t, true)
	s.allowCoreToReadNamespaces()
	s.namespacePolicy(map[string]any{"quotas": map[string]any{"widgets": int64(1)}})

	const n = 50
	xrs := make([]*unstructured.Unstructured, n)
	objs := make([]client.Object, n)
	for i := range n {
		xrs[i] = s.xwidget(fmt.Sprintf("burst-%02d", i), map[string]any{"size": "small", "keys": int64(0)})
		objs[i] = xrs[i]
	}
	start := time.Now()
	s.createConcurrently(8, objs...)

	s.eventually("one of 50 XWidgets is Ready and 49 are refused", func() error {
		ready, refused := 0, 0
		for _, x := range xrs {
			if err := s.get(x); err != nil {
				return err
			}
			switch c := platform.GetCondition(x, "PolicyCompliant"); {
			case c.Reason == "QuotaExceeded":
				refused++
			case c.Status == "True" && platform.GetCondition(x, "Ready").Status == "True":
				ready++
			}
		}
		if ready != 1 || refused != n-1 {
			return errors.Errorf("%d Ready, %d refused with QuotaExceeded; want 1 and %d", ready, refused, n-1)
		}
		return nil
	})
	t.Logf("one Ready and %d refused %s after the 50 were applied", n-1, time.Since(start).Round(100*time.Millisecond))

	// The refused XWidgets are retried with backoff: the count must hold.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ws, err := s.scenarioWidgets()
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 {
			names := make([]string, 0, len(ws))
			for _, w := range ws {
				names = append(names, w.Name)
			}
			t.Fatalf("the Widget API holds %d widgets of the 50 XWidgets under quotas.widgets: 1, want 1: %v", len(ws), names)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("the Widget API holds 1 widget of the 50 XWidgets under quotas.widgets: 1, 15 s after they converged")
}
