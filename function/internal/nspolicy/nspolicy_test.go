package nspolicy

import (
	"os"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"
)

// TestCompositionsBootstrapPolicies checks that the example Compositions
// declare, as the step's bootstrap requirement, exactly what the function
// asks for first: Crossplane then calls it once at an XR's first reconcile,
// not twice. A requirement that differs from the function's would cost a
// call more, not less.
func TestCompositionsBootstrapPolicies(t *testing.T) {
	want := teamRequirements("any", needs{}).GetResources()
	for _, path := range []string{"../../../examples/composition/namespaced/composition.yaml", "../../../examples/composition/legacy/composition.yaml"} {
		t.Run(path, func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var comp struct {
				Spec struct {
					Pipeline []struct {
						FunctionRef  struct{ Name string } `json:"functionRef"`
						Requirements struct {
							RequiredResources []struct {
								RequirementName string            `json:"requirementName"`
								APIVersion      string            `json:"apiVersion"`
								Kind            string            `json:"kind"`
								MatchLabels     map[string]string `json:"matchLabels"`
							} `json:"requiredResources"`
						} `json:"requirements"`
					} `json:"pipeline"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(b, &comp); err != nil {
				t.Fatal(err)
			}
			got := map[string]*fnv1.ResourceSelector{}
			for _, s := range comp.Spec.Pipeline {
				if s.FunctionRef.Name != "function-widget" {
					continue
				}
				for _, r := range s.Requirements.RequiredResources {
					got[r.RequirementName] = &fnv1.ResourceSelector{ApiVersion: r.APIVersion, Kind: r.Kind,
						Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: r.MatchLabels}}}
				}
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("function-widget's bootstrap requirements in %s: -what the function asks first, +declared:\n%s", path, diff)
			}
		})
	}
}
