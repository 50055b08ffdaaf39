// Package docs holds generated documentation. `go generate ./...` rebuilds
// api-reference.md from the CRDs and XRDs; `make check-diff` fails when it is
// stale.
package docs

//go:generate go run ../hack/apidocs -title "API reference" -out api-reference.md ../package/provider/crds ../package/function/input ../examples/composition/namespaced/definition.yaml ../examples/composition/legacy/definition.yaml
