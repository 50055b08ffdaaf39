package e2e_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/harness"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// The reproduction's composite resource and Composition: one namespaced
// Widget per XR, composed by function-patch-and-transform (upstream, v0.5.0),
// ready when the Widget's Ready condition is True. Nothing of
// function-widget takes part.
const (
	reproXRD = `apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xrepros.repro.widgetco.io
spec:
  group: repro.widgetco.io
  names: {kind: XRepro, plural: xrepros}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
          status:
            type: object
            properties:
              widgetState: {type: string}
`
	reproComposition = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xrepros.repro.widgetco.io
spec:
  compositeTypeRef: {apiVersion: repro.widgetco.io/v1alpha1, kind: XRepro}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: widget
        base:
          apiVersion: widget.m.widgetco.io/v1alpha1
          kind: Widget
          spec:
            providerConfigRef: {kind: ClusterProviderConfig, name: default}
            forProvider: {size: small, region: us-east-1, description: upstream reproduction}
        patches:
        - type: FromCompositeFieldPath
          fromFieldPath: spec.size
          toFieldPath: spec.forProvider.size
        - type: ToCompositeFieldPath
          fromFieldPath: status.atProvider.state
          toFieldPath: status.widgetState
`
)

// TestUpstreamStaleConditions reproduces the losses of Ready that
// TestConvergence sees without function-widget: 60 XRs of a composite
// resource whose Composition runs only function-patch-and-transform,
// composing one Widget each, created at once by 8 clients. It counts the
// XRs that lose Ready after their first Ready, while converging and in 30 s
// after all are Ready. It fails when any does, which is what Crossplane
// core v2.4.2's stale conditions (docs/convergence.md) are expected to
// cause; it is the reproduction for the upstream report, so it runs only
// with E2E_UPSTREAM_REPRO=1 and FUNCTION_PATCH_AND_TRANSFORM_BIN (`bash
// hack/tools.sh function-patch-and-transform`).
func TestUpstreamStaleConditions(t *testing.T) {
	if os.Getenv("E2E_UPSTREAM_REPRO") == "" {
		t.Skip("the upstream reproduction runs only with E2E_UPSTREAM_REPRO=1")
	}
	s := newScenario(t, false)
	bin := os.Getenv("FUNCTION_PATCH_AND_TRANSFORM_BIN")
	if bin == "" {
		t.Fatal("FUNCTION_PATCH_AND_TRANSFORM_BIN is unset: run `bash hack/tools.sh function-patch-and-transform` and eval \"$(bash hack/tools.sh env)\"")
	}
	xpkg, err := harness.BuildFunction(s.ctx, suite.crank, t.TempDir(), "function-patch-and-transform", bin)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := suite.h.PushPackage(s.ctx, xpkg, "function-patch-and-transform:v0.5.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := suite.h.InstallFunction(s.ctx, "function-patch-and-transform", ref, harness.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	objs := make([]*unstructured.Unstructured, 0, 2)
	for _, y := range []string{reproXRD, reproComposition} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	if err := platform.Create(s.ctx, suite.kube, objs...); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "repro.widgetco.io", Version: "v1alpha1", Resource: "xrepros"}
	s.eventually("the XRepro API served", func() error {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("repro.widgetco.io/v1alpha1")
		l.SetKind("XReproList")
		return suite.kube.List(s.ctx, l)
	})
	rec, err := platform.RecordReady(s.ctx, suite.h.RESTConfig(), gvr, s.ns, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = rec.Stop() })

	const n = 60
	xrs := make([]client.Object, 0, n)
	for i := range n {
		xrs = append(xrs, s.appObject("repro.widgetco.io/v1alpha1", "XRepro", fmt.Sprintf("r%02d", i), map[string]any{"size": "small"}))
	}
	begin := time.Now()
	s.createConcurrently(8, xrs...)
	s.eventually(fmt.Sprintf("%d XRepros Ready", n), func() error {
		if !rec.AllReady(n) {
			return errors.New("not all Ready yet")
		}
		return nil
	})
	readyIn := time.Since(begin)
	time.Sleep(convergenceQuiet)

	lost := rec.Lost()
	losers := map[string]int{}
	for _, l := range lost {
		losers[l.Name]++
	}
	t.Logf("MEASURED upstream reproduction: %d XRepros (function-patch-and-transform only) Ready %s after the first create; %d losses of Ready on %d XRs, until %s after all were Ready",
		n, readyIn.Round(100*time.Millisecond), len(lost), len(losers), convergenceQuiet)
	for _, l := range lost {
		t.Errorf("XRepro %s lost Ready at %s (%s): %s", l.Name, l.At.Format(time.RFC3339Nano), l.Reason, l.Message)
	}
}
