package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestValidateOperations validates examples/operations (Operations, a
// CronOperation and a WatchOperation with RotateKeys and AdoptWidgets
// inputs) and examples/adoption (a WidgetInventory) against Crossplane's
// and the provider's CRDs: crossplane beta validate checks the ops.crossplane.io
// objects, not the inputs they embed, which TestOperationExamples
// (function/fn) decodes and runs.
func TestValidateOperations(t *testing.T) {
	out, err := validate(t, "examples/operations,examples/adoption")
	if err != nil {
		t.Fatalf("crossplane beta validate should accept examples/operations: %v\n%s", err, out)
	}
	if !validatecli.Clean(out) {
		t.Errorf("crossplane beta validate should report no failures:\n%s", out)
	}
	if !strings.Contains(out, "6 success cases") {
		t.Errorf("crossplane beta validate should validate the 6 examples:\n%s", out)
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
