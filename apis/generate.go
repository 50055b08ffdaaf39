package apis

// Generated code is made only by `go generate ./...`. The tools are pinned by
// the module's tool directives. Generation first removes everything it
// generated before, so that files of renamed or removed kinds do not linger:
// the output depends only on the API types.

// Remove previously generated code and CRDs.
//go:generate find . -name zz_generated.*.go -delete
//go:generate rm -rf ../package/provider/crds

// Generate deepcopy methods (zz_generated.deepcopy.go) and CRD manifests.
//go:generate go tool controller-gen object:headerFile=../hack/boilerplate.go.txt paths=./... crd:crdVersions=v1 output:artifacts:config=../package/provider/crds

// Give the CRDs that serve several versions a conversion webhook (the
// provider serves it; Crossplane wires its Service and CA bundle).
//go:generate go run ../hack/crdconversion ../package/provider/crds

// Generate crossplane-runtime method sets (zz_generated.managed.go,
// zz_generated.managedlist.go, zz_generated.pc.go, zz_generated.pcu.go,
// zz_generated.pculist.go) and reference resolvers (zz_generated.resolvers.go).
//go:generate go tool angryjet generate-methodsets --header-file=../hack/boilerplate.go.txt ./...
