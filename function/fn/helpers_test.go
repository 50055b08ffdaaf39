package fn

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composite"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

var errBoom = errors.New("boom")

// compositeOf returns an observed XR.
func compositeOf(o map[string]any) *resource.Composite {
	return &resource.Composite{
		Resource:          &composite.Unstructured{Unstructured: unstructured.Unstructured{Object: o}},
		ConnectionDetails: resource.ConnectionDetails{},
	}
}

// Test builders. Objects are plain maps, written the way Crossplane and the
// provider write them, so that the tests do not share code with what they
// test. Every builder returns a new object; modifiers change it in place.

func TestMain(m *testing.M) {
	// Register the schemes the way main does: once, before any request.
	if err := registerSchemes(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// A mod modifies an object.
type mod func(o map[string]any)

func build(o map[string]any, mods ...mod) map[string]any {
	for _, m := range mods {
		m(o)
	}
	return o
}

// set sets the value at a field path.
func set(path string, v any) mod {
	return func(o map[string]any) {
		if err := fieldpath.Pave(o).SetValue(path, v); err != nil {
			panic(err)
		}
	}
}

// unset removes the value at a field path.
func unset(path string) mod {
	return func(o map[string]any) {
		if err := fieldpath.Pave(o).DeleteField(path); err != nil {
			panic(err)
		}
	}
}

// conditions sets status.conditions.
func conditions(cs ...map[string]any) mod {
	l := make([]any, 0, len(cs))
	for _, c := range cs {
		l = append(l, c)
	}
	return set("status.conditions", l)
}

// xpCondition is a condition as Crossplane writes it to an object.
func xpCondition(typ, status, reason, msg string) map[string]any {
	c := map[string]any{"type": typ, "status": status, "reason": reason, "lastTransitionTime": "2026-01-01T00:00:00Z"}
	if msg != "" {
		c["message"] = msg
	}
	return c
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// The platform's policy of the examples.
func policyInput(mods ...mod) map[string]any {
	return build(map[string]any{
		"apiVersion": "fn.widgetco.io/v1beta1",
		"kind":       "WidgetPolicy",
		"defaults": map[string]any{
			"size":   "small",
			"region": "us-east-1",
			"keys":   1,
			"labels": map[string]any{"managed-by": "crossplane"},
		},
		"rules": map[string]any{
			"allowedSizes":   []any{"small", "medium"},
			"allowedRegions": []any{"us-east-1", "eu-west-1"},
			"requiredLabels": []any{"team"},
			"maxKeys":        3,
		},
		"ttl": map[string]any{"converging": "1m", "ready": "10m"},
	}, mods...)
}

// A namespaced XWidget team-a/web: medium, two keys.
func nsXR(mods ...mod) map[string]any {
	return build(map[string]any{
		"apiVersion": "platform.widgetco.io/v1alpha1",
		"kind":       "XWidget",
		"metadata":   map[string]any{"name": "web", "namespace": "team-a", "uid": "6e6d1b7e-6c2f-4a39-9a57-3c9f7c1d2e10"},
		"spec": map[string]any{
			"size":   "medium",
			"keys":   2,
			"labels": map[string]any{"team": "payments"},
			"crossplane": map[string]any{
				"compositionRef": map[string]any{"name": "xwidgets.platform.widgetco.io"},
			},
		},
	}, mods...)
}

// A legacy XWidget web-5t2xq of the WidgetClaim team-b/web: one key, in
// eu-west-1.
func legacyXR(mods ...mod) map[string]any {
	return build(map[string]any{
		"apiVersion": "legacy.platform.widgetco.io/v1alpha1",
		"kind":       "XWidget",
		"metadata":   map[string]any{"name": "web-5t2xq", "uid": "0d6c5a8e-3f1b-4c47-9a7e-2b8f6d1e4c93"},
		"spec": map[string]any{
			"region": "eu-west-1",
			"keys":   1,
			"labels": map[string]any{"team": "checkout"},
			"claimRef": map[string]any{
				"apiVersion": "legacy.platform.widgetco.io/v1alpha1",
				"kind":       "WidgetClaim",
				"name":       "web",
				"namespace":  "team-b",
			},
			"compositionRef":             map[string]any{"name": "xwidgets.legacy.platform.widgetco.io"},
			"writeConnectionSecretToRef": map[string]any{"name": "0d6c5a8e-3f1b-4c47-9a7e-2b8f6d1e4c93", "namespace": "crossplane-system"},
		},
	}, mods...)
}

// The observed namespaced Widget of nsXR, as the provider reports it while
// the Widget API provisions it.
func nsWidget(mods ...mod) map[string]any {
	return build(map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name":      "web-8k2mz",
			"namespace": "team-a",
			"annotations": map[string]any{
				"crossplane.io/composition-resource-name": "widget",
				"crossplane.io/external-name":             "team-a-web-8k2mz",
			},
		},
		"spec": map[string]any{
			"forProvider":  map[string]any{"size": "medium"},
			"initProvider": map[string]any{"region": "us-east-1"},
		},
		"status": map[string]any{
			"atProvider": map[string]any{"id": "w-7f3c9a", "state": "Provisioning", "size": "medium", "region": "us-east-1", "generation": 1},
			"conditions": []any{
				xpCondition("Ready", "False", "Creating", ""),
				xpCondition("Synced", "True", "ReconcileSuccess", ""),
			},
		},
	}, mods...)
}

// widgetReady makes an observed Widget ready, at the supplied endpoint.
func widgetReady(endpoint string) mod {
	return func(o map[string]any) {
		set("status.atProvider.state", "Ready")(o)
		set("status.atProvider.endpoint", endpoint)(o)
		conditions(xpCondition("Ready", "True", "Available", ""), xpCondition("Synced", "True", "ReconcileSuccess", ""))(o)
	}
}

// The observed namespaced WidgetKey of access key i of nsXR.
func nsKey(i int, mods ...mod) map[string]any {
	names := []string{"web-q2w7d", "web-m5n8c", "web-x1y2z"}
	return build(map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "WidgetKey",
		"metadata": map[string]any{
			"name":      names[i],
			"namespace": "team-a",
			"annotations": map[string]any{
				"crossplane.io/composition-resource-name": string(keyResourceName(i)),
			},
		},
		"spec": map[string]any{"forProvider": map[string]any{"widgetName": "team-a-web-8k2mz"}},
		"status": map[string]any{"conditions": []any{
			xpCondition("Ready", "True", "Available", ""),
			xpCondition("Synced", "True", "ReconcileSuccess", ""),
		}},
	}, mods...)
}

// The observed cluster-scoped Widget of legacyXR, ready.
func legacyWidget(mods ...mod) map[string]any {
	return build(map[string]any{
		"apiVersion": "widget.widgetco.io/v1beta1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name": "web-5t2xq-h7kzp",
			"annotations": map[string]any{
				"crossplane.io/composition-resource-name": "widget",
				"crossplane.io/external-name":             "web-5t2xq-h7kzp",
			},
		},
		"spec": map[string]any{
			"forProvider":  map[string]any{"size": "small"},
			"initProvider": map[string]any{"region": "eu-west-1"},
		},
		"status": map[string]any{
			"atProvider": map[string]any{"state": "Ready", "endpoint": "https://web-5t2xq-h7kzp.widgets.example.com", "size": "small", "region": "eu-west-1"},
			"conditions": []any{
				xpCondition("Ready", "True", "Available", ""),
				xpCondition("Synced", "True", "ReconcileSuccess", ""),
			},
		},
	}, mods...)
}

// The observed cluster-scoped WidgetKey of access key 0 of legacyXR.
func legacyKey(mods ...mod) map[string]any {
	return build(map[string]any{
		"apiVersion": "widget.widgetco.io/v1beta1",
		"kind":       "WidgetKey",
		"metadata": map[string]any{
			"name":        "web-5t2xq-b4r6s",
			"annotations": map[string]any{"crossplane.io/composition-resource-name": "key-0"},
		},
		"spec": map[string]any{"forProvider": map[string]any{"widgetName": "web-5t2xq-h7kzp"}},
		"status": map[string]any{"conditions": []any{
			xpCondition("Ready", "True", "Available", ""),
			xpCondition("Synced", "True", "ReconcileSuccess", ""),
		}},
	}, mods...)
}

// keyDetails are the connection details a WidgetKey publishes.
func keyDetails(name, key, widget, endpoint string) map[string][]byte {
	return map[string][]byte{"key": []byte(key), "keyName": []byte(name), "widget": []byte(widget), "endpoint": []byte(endpoint)}
}

// A testRequest is a RunFunctionRequest under construction.
type testRequest struct {
	xr       map[string]any
	input    map[string]any
	observed map[string]*fnv1.Resource
	desired  *fnv1.State
}

func (r testRequest) build() *fnv1.RunFunctionRequest {
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "tag"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructObject(&unstructured.Unstructured{Object: r.xr})}, Resources: r.observed},
		Desired:  r.desired,
	}
	if r.input != nil {
		req.Input = resource.MustStructObject(&unstructured.Unstructured{Object: r.input})
	}
	return req
}

// observed returns an observed composed resource.
func observed(o map[string]any, details map[string][]byte) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructObject(&unstructured.Unstructured{Object: o}), ConnectionDetails: details}
}

// want builders for the response.

func wantCondition(typ string, status fnv1.Status, reason, msg string) *fnv1.Condition {
	return &fnv1.Condition{Type: typ, Status: status, Reason: reason, Message: &msg, Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()}
}

func result(sev fnv1.Severity, reason, msg string) *fnv1.Result {
	return &fnv1.Result{Severity: sev, Reason: &reason, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum()}
}

func fatal(msg string) *fnv1.Result {
	return &fnv1.Result{Severity: fnv1.Severity_SEVERITY_FATAL, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE.Enum()}
}

const (
	condTrue    = fnv1.Status_STATUS_CONDITION_TRUE
	condFalse   = fnv1.Status_STATUS_CONDITION_FALSE
	sevNormal   = fnv1.Severity_SEVERITY_NORMAL
	sevWarning  = fnv1.Severity_SEVERITY_WARNING
	readyTrue   = fnv1.Ready_READY_TRUE
	readyFalse  = fnv1.Ready_READY_FALSE
	nsEndpoint  = "https://team-a-web-8k2mz.widgets.example.com"
	lgEndpoint  = "https://web-5t2xq-h7kzp.widgets.example.com"
	nsCompliant = "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."
	lgCompliant = "WidgetClaim team-b/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-b."
)

// The desired namespaced Widget of nsXR under policyInput.
func wantNSWidget() map[string]any {
	return map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "Widget",
		"metadata":   map[string]any{"labels": map[string]any{"fn.widgetco.io/component": "widget"}},
		"spec": map[string]any{
			"forProvider": map[string]any{
				"size":        "medium",
				"labels":      map[string]any{"managed-by": "crossplane", "team": "payments"},
				"description": "XWidget team-a/web, managed by Crossplane",
			},
			"initProvider":      map[string]any{"region": "us-east-1"},
			"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "default"},
		},
	}
}

// The desired namespaced WidgetKey of access key i of nsXR.
func wantNSKey(i int) map[string]any {
	return map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "WidgetKey",
		"spec": map[string]any{
			"forProvider": map[string]any{
				"widgetNameSelector": map[string]any{
					"matchControllerRef": true,
					"matchLabels":        map[string]any{"fn.widgetco.io/component": "widget"},
				},
			},
			"initProvider": map[string]any{
				"description": []string{
					"Access key 0 of XWidget team-a/web, managed by Crossplane",
					"Access key 1 of XWidget team-a/web, managed by Crossplane",
				}[i],
			},
			"providerConfigRef":          map[string]any{"kind": "ClusterProviderConfig", "name": "default"},
			"writeConnectionSecretToRef": map[string]any{"name": []string{"web-key-0", "web-key-1"}[i]},
		},
	}
}

// The desired connection Secret of nsXR, with the supplied data.
func wantNSSecret(data map[string]any) map[string]any {
	s := map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": "web-connection"},
		"type":       "Opaque",
	}
	if len(data) > 0 {
		s["data"] = data
	}
	return s
}

// The desired cluster-scoped Widget of legacyXR under policyInput.
func wantLegacyWidget() map[string]any {
	return map[string]any{
		"apiVersion": "widget.widgetco.io/v1beta1",
		"kind":       "Widget",
		"metadata":   map[string]any{"labels": map[string]any{"fn.widgetco.io/component": "widget"}},
		"spec": map[string]any{
			"forProvider": map[string]any{
				"size":        "small",
				"labels":      map[string]any{"managed-by": "crossplane", "team": "checkout"},
				"description": "WidgetClaim team-b/web, managed by Crossplane",
			},
			"initProvider":      map[string]any{"region": "eu-west-1"},
			"providerConfigRef": map[string]any{"name": "default"},
		},
	}
}

// The desired cluster-scoped WidgetKey of access key 0 of legacyXR.
func wantLegacyKey() map[string]any {
	return map[string]any{
		"apiVersion": "widget.widgetco.io/v1beta1",
		"kind":       "WidgetKey",
		"spec": map[string]any{
			"forProvider": map[string]any{
				"widgetNameSelector": map[string]any{
					"matchControllerRef": true,
					"matchLabels":        map[string]any{"fn.widgetco.io/component": "widget"},
				},
			},
			"initProvider":               map[string]any{"description": "Access key 0 of WidgetClaim team-b/web, managed by Crossplane"},
			"providerConfigRef":          map[string]any{"name": "default"},
			"writeConnectionSecretToRef": map[string]any{"name": "web-5t2xq-key-0", "namespace": "crossplane-system"},
		},
	}
}

func desired(o map[string]any, r fnv1.Ready) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructObject(&unstructured.Unstructured{Object: o}), Ready: r}
}

// xrStatus is a desired XR with the supplied status fields.
func xrStatus(fields map[string]any) *fnv1.Resource {
	return &fnv1.Resource{Resource: resource.MustStructObject(&unstructured.Unstructured{Object: map[string]any{"status": fields}})}
}

// inputOf returns the WidgetPolicy of an input object.
func inputOf(o map[string]any) *v1beta1.WidgetPolicy {
	in := &v1beta1.WidgetPolicy{}
	if err := resource.AsObject(resource.MustStructObject(&unstructured.Unstructured{Object: o}), in); err != nil {
		panic(err)
	}
	return in
}

// requests are calls the function typically gets, one per stage and flavour.
func requests() map[string]*fnv1.RunFunctionRequest {
	ready := func(i int) map[string][]byte {
		return keyDetails([]string{"team-a-web-q2w7d", "team-a-web-m5n8c"}[i], "s3cr3t", "team-a-web-8k2mz", nsEndpoint)
	}
	return map[string]*fnv1.RunFunctionRequest{
		"NamespacedNew": testRequest{xr: nsXR(), input: policyInput()}.build(),
		"NamespacedProvisioning": testRequest{xr: nsXR(), input: policyInput(), observed: map[string]*fnv1.Resource{
			"widget": observed(nsWidget(), nil),
		}}.build(),
		"NamespacedReady": testRequest{xr: nsXR(), input: policyInput(), observed: map[string]*fnv1.Resource{
			"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil),
			"key-0":  observed(nsKey(0), ready(0)),
			"key-1":  observed(nsKey(1), ready(1)),
		}}.build(),
		"LegacyReady": testRequest{xr: legacyXR(), input: policyInput(), observed: map[string]*fnv1.Resource{
			"widget": observed(legacyWidget(), nil),
			"key-0":  observed(legacyKey(), keyDetails("web-5t2xq-b4r6s", "s3cr3t", "web-5t2xq-h7kzp", lgEndpoint)),
		}}.build(),
		"PolicyViolation": testRequest{xr: nsXR(set("spec.size", "large")), input: policyInput()}.build(),
		"WithDesiredState": testRequest{xr: nsXR(), input: policyInput(), desired: &fnv1.State{
			Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{"status": {"a": "b"}}`)},
			Resources: map[string]*fnv1.Resource{"bucket": {Resource: resource.MustStructJSON(`{"apiVersion": "example.org/v1", "kind": "Bucket"}`)}},
		}}.build(),
	}
}

// manyLabels returns n labels whose keys are invalid: uppercase.
func manyLabels(n int) map[string]string {
	l := make(map[string]string, n)
	for i := range n {
		l[fmt.Sprintf("K%d", i)] = "v"
	}
	return l
}

// fieldErrors returns the invalid fields of a rejection, or nil for nil.
func fieldErrors(t *testing.T, err error) field.ErrorList {
	t.Helper()
	if err == nil {
		return nil
	}
	r := &rejection{}
	if !errors.As(err, &r) {
		t.Fatalf("want a rejection, got %T: %v", err, err)
	}
	return r.fields
}

// fatalMessage returns the message of rsp's fatal result, or "".
func fatalMessage(rsp *fnv1.RunFunctionResponse) string {
	var msg string
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			msg = r.GetMessage()
		}
	}
	return msg
}

// rejected checks rsp against a wanted fatal result: when one is wanted
// (wantFatal is part of its message) the XR must have composed nothing, and
// rejected reports true; when none is wanted, a fatal result fails the test.
func rejected(t *testing.T, reason string, rsp *fnv1.RunFunctionResponse, wantFatal string) bool {
	t.Helper()
	fatal := fatalMessage(rsp)
	if wantFatal != "" {
		if !strings.Contains(fatal, wantFatal) {
			t.Errorf("%s\nfatal result: want it to contain %q, got %q", reason, wantFatal, fatal)
		}
		if n := len(rsp.GetDesired().GetResources()); n != 0 {
			t.Errorf("%s\na rejected XR composed %d resources", reason, n)
		}
		return true
	}
	if fatal != "" {
		t.Fatalf("%s\nunexpected fatal result: %s", reason, fatal)
	}
	return false
}
