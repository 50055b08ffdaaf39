// Package v1beta1 is version v1beta1 of the fn.widgetco.io API group: the
// input of function-widget. A Composition passes one WidgetPolicy to the
// function in its pipeline step's input. The platform team uses it to set the
// defaults and the policy that every XWidget composed with that Composition
// gets.
//
// Crossplane does not validate a function's input against this schema; the
// function validates it on every call and reports problems as a fatal result.
// The generated CRD is shipped in the function's package so that tools such
// as `crossplane beta validate` can check Compositions offline.
//
// +kubebuilder:object:generate=true
// +groupName=fn.widgetco.io
// +versionName=v1beta1
package v1beta1
