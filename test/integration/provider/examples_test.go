package provider_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestProviderExamplesAreValid creates every object of examples/provider in
// the real API server (dry run), so schema and CEL validation check them.
func TestProviderExamplesAreValid(t *testing.T) {
	e := newEnv(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "provider", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, ns := range []string{"team-a", "crossplane-system"} {
		_ = e.kube.Create(e.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			n++
			if err := e.kube.Create(e.ctx(), u, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s is rejected: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
		}
	}
	if n < 8 {
		t.Errorf("validated only %d objects", n)
	}
}
