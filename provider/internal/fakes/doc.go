// Package fakes holds the test doubles the provider's unit tests share: one
// copy of each, used by every package's tests. Each is a small struct that
// records the calls made to it (or, for Kube, a crossplane-runtime
// test.MockClient with an object store), safe for concurrent use, with a
// ready-to-use zero value unless a constructor says otherwise.
//
// Where crossplane-runtime already provides a double, tests use it instead:
// test.MockClient for a Kubernetes client whose calls a test scripts, and
// event.NewNopRecorder where a test does not check events.
//
// The package imports no other provider package, so that every one of them,
// clients included, can use it in its own tests.
package fakes
