// Command crdconversion gives every CRD in a directory that serves more than
// one version a conversion webhook: spec.conversion.strategy Webhook, served
// at /convert (controller-runtime's conversion handler). controller-gen has
// no marker for it. Crossplane's package manager fills in the webhook's
// Service and CA bundle when it installs the provider package.
//
// Usage: go run ./hack/crdconversion <dir>
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// conversion is inserted right after the CRD's top-level "spec:" line.
const conversion = `  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          name: provider-widget
          namespace: crossplane-system
          path: /convert
      conversionReviewVersions:
      - v1
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdconversion <directory of CRD YAML files>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdconversion:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := patch(f); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

func patch(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	crd := &extv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		return err
	}
	if len(crd.Spec.Versions) < 2 || crd.Spec.Conversion != nil {
		return nil
	}
	out, ok := insertAfter(b, []byte("\nspec:\n"), []byte(conversion))
	if !ok {
		return fmt.Errorf("no top-level spec: line")
	}
	check := &extv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(out, check); err != nil {
		return fmt.Errorf("patched CRD does not parse: %w", err)
	}
	if check.Spec.Conversion == nil || check.Spec.Conversion.Strategy != extv1.WebhookConverter {
		return fmt.Errorf("patched CRD has no conversion webhook")
	}
	return os.WriteFile(file, out, 0o600)
}

// insertAfter inserts ins after the first occurrence of marker.
func insertAfter(b, marker, ins []byte) ([]byte, bool) {
	i := bytes.Index(b, marker)
	if i < 0 {
		return nil, false
	}
	i += len(marker)
	out := make([]byte, 0, len(b)+len(ins))
	out = append(out, b[:i]...)
	out = append(out, ins...)
	return append(out, b[i:]...), true
}
