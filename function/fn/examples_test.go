package fn

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// TestExamplesComply checks, without any tool, that the examples' function
// inputs are valid and that their XRs comply with them: a platform team can
// copy them as they are.
func TestExamplesComply(t *testing.T) {
	cases := map[string]struct {
		reason      string
		composition string
		xr          string
	}{
		"Namespaced": {
			reason:      "The namespaced example XR should comply with its Composition's policy.",
			composition: "namespaced/composition.yaml",
			xr:          "namespaced/xr.yaml",
		},
		"Legacy": {
			reason:      "The legacy example XR should comply with its Composition's policy.",
			composition: "legacy/composition.yaml",
			xr:          "legacy/xr.yaml",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var comp struct {
				Spec struct {
					Pipeline []struct {
						Input map[string]any `json:"input"`
					} `json:"pipeline"`
				} `json:"spec"`
			}
			readYAML(t, tc.composition, &comp)
			if len(comp.Spec.Pipeline) != 1 {
				t.Fatalf("%s\nwant one pipeline step, got %d", tc.reason, len(comp.Spec.Pipeline))
			}
			var xr map[string]any
			readYAML(t, tc.xr, &xr)

			f, err := NewFunction()
			if err != nil {
				t.Fatal(err)
			}
			rsp, err := f.RunFunction(context.Background(), testRequest{xr: xr, input: comp.Spec.Pipeline[0].Input}.build())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() != sevNormal {
					t.Errorf("%s\nthe function should compose the example without problems, got: %s", tc.reason, r.GetMessage())
				}
			}
			in := inputOf(comp.Spec.Pipeline[0].Input)
			if in.Kind != v1beta1.Kind || in.APIVersion != v1beta1.APIVersion {
				t.Errorf("%s\nthe input should be a %s, got %s %s", tc.reason, v1beta1.APIVersion, in.APIVersion, in.Kind)
			}
		})
	}
}

// TestClaimMatchesLegacyXR checks that the legacy example XR, which stands
// for what Crossplane creates from the example claim, asks for what the claim
// asks for.
func TestClaimMatchesLegacyXR(t *testing.T) {
	var claim, xr struct {
		Spec xwidgetSpec `json:"spec"`
	}
	readYAML(t, "legacy/claim.yaml", &claim)
	readYAML(t, "legacy/xr.yaml", &xr)
	// The claim's connection secret is the claim's, not the XR's.
	claim.Spec.WriteConnectionSecretToRef, xr.Spec.WriteConnectionSecretToRef = nil, nil
	if diff := cmp.Diff(claim.Spec, xr.Spec); diff != "" {
		t.Errorf("legacy/xr.yaml should have the spec of legacy/claim.yaml: -claim, +xr:\n%s", diff)
	}
}

// readYAML reads file, a path under examples/composition, into into.
func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "composition", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("cannot parse %s: %v", file, err)
	}
}
