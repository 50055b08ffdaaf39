package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	validatecli "github.com/widgetco/crossplane-widget/test/lib/validate"
)

// The XRDs and CRDs the examples are validated against.
var extensions = []string{
	examples + "/namespaced/definition.yaml",
	examples + "/legacy/definition.yaml",
	"package/provider/crds",
	"package/function/input",
}

// TestValidate validates the examples (XRDs, Compositions with their
// WidgetPolicy inputs, XRs, the claim, functions.yaml and the observed
// resources) and the rendered goldens of TestRender with `crossplane beta
// validate`, against the XRDs, the provider's CRDs and the function input's
// CRD. It runs offline (see tools/README.md) and needs the Crossplane CLI
// and Crossplane's CRDs (CRANK_BIN, CROSSPLANE_CRDS from hack/tools.sh).
func TestValidate(t *testing.T) {
	rendered := t.TempDir()
	for name, tc := range renderCases() {
		if tc.wantErr {
			continue
		}
		b, err := os.ReadFile(filepath.Join(goldenDir, name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// Results are render's own kind, which has no schema.
		if err := os.WriteFile(filepath.Join(rendered, name+".yaml"), withoutKind(b, "apiVersion: render.crossplane.io/"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	out, err := validate(t, examples+","+rendered)
	if err != nil {
		t.Fatalf("crossplane beta validate should accept the examples and the rendered output: %v\n%s", err, out)
	}
	if !validatecli.Clean(out) {
		t.Errorf("crossplane beta validate should report no failures:\n%s", out)
	}
}

// TestValidateRejects checks that the XRDs' and the function input's schemas
// reject bad values with messages that say what is wrong.
func TestValidateRejects(t *testing.T) {
	cases := map[string]struct {
		reason string
		file   string
		want   []string
	}{
		"XR": {
			reason: "The v2 XRD should reject each bad field of an XWidget with a clear message.",
			file:   "testdata/validate/xr-invalid.yaml",
			want: []string{
				`spec.size: Unsupported value: "huge": supported values: "small", "medium", "large"`,
				`spec.keys: Invalid value: 11: spec.keys in body should be less than or equal to 10`,
				`spec.region: Invalid value: "Moon": region must look like us-east-1`,
				`spec.labels: Invalid value: label keys with the prefix widgetco.io/ are reserved for the provider; use another prefix`,
				`spec.writeConnectionSecretToRef.name: Invalid value: "Not_A_Secret": name must be a valid Secret name`,
				`spec.rotation: Invalid value: overlap must be shorter than period`,
				`spec.rotation.period: Invalid value: "30m": period must be a Go duration from 1h to 87600h`,
				`spec.rotation.requestedAt: Invalid value: "now": spec.rotation.requestedAt in body must be of type date-time`,
			},
		},
		"Claim": {
			reason: "The legacy XRD should reject each bad field of a WidgetClaim with a clear message.",
			file:   "testdata/validate/claim-invalid.yaml",
			want: []string{
				`spec.size: Unsupported value: "tiny": supported values: "small", "medium", "large"`,
				`spec.keys: Invalid value: -1: spec.keys in body should be greater than or equal to 0`,
				`spec.labels: Invalid value: label keys must be 1 to 63 characters`,
			},
		},
		"FunctionInput": {
			reason: "The function input's CRD should reject a bad WidgetPolicy in a Composition.",
			file:   "testdata/validate/composition-invalid-input.yaml",
			want: []string{
				`defaults.size: Unsupported value: "huge"`,
				`rules.maxKeys: Invalid value: 20: rules.maxKeys in body should be less than or equal to 10`,
				`namespaced.providerConfigRef.kind: Unsupported value: "Secret": supported values: "ProviderConfig", "ClusterProviderConfig"`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := validate(t, "function/"+tc.file)
			if err == nil {
				t.Fatalf("%s\ncrossplane beta validate should reject %s, but accepted it:\n%s", tc.reason, tc.file, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s\ncrossplane beta validate should say %q; it said:\n%s", tc.reason, w, out)
				}
			}
		})
	}
}

// validate runs `crossplane beta validate` of the supplied resources (comma
// separated) against the extensions, offline.
func validate(t *testing.T, resources string) (string, error) {
	t.Helper()
	return validatecli.Run(t, repoRoot, extensions, strings.Split(resources, ","))
}

// withoutKind removes the YAML documents that contain marker from a stream.
func withoutKind(stream []byte, marker string) []byte {
	docs := strings.Split(string(stream), "\n---\n")
	kept := make([]string, 0, len(docs))
	for _, d := range docs {
		if !strings.Contains(d, marker) {
			kept = append(kept, d)
		}
	}
	return []byte(strings.Join(kept, "\n---\n"))
}

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

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, examples, file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("cannot parse %s: %v", file, err)
	}
}
