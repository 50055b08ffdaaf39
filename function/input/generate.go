// Package input holds the API of function-widget's input: the WidgetPolicy
// that a Composition passes to the function (package v1beta1), and the
// generate directives that derive its CRD, which the function's package
// ships, from the Go types.
package input

// Generated code is made only by `go generate ./...`. Generation first removes
// the CRDs it generated before, so that a renamed kind does not linger.

//go:generate rm -rf ../../package/function/input

//go:generate go tool controller-gen object:headerFile=../../hack/boilerplate.go.txt paths=./v1beta1 crd:crdVersions=v1 output:artifacts:config=../../package/function/input
