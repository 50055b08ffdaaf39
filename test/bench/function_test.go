//go:build linux

package bench

import (
	"encoding/base64"
	"fmt"
	"os"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

func init() { register(10, "function", functionSection) }

// grpcRounds is how many times each gRPC scenario is measured; the document
// reports the medians of the rounds' p50 and p99.
const grpcRounds = 3

// inProcessCount is how many times each in-process benchmark runs
// (go test -count); the document reports the medians.
const inProcessCount = 5

// functionSection: the function's Go benchmarks in process, then the
// function over gRPC against function-patch-and-transform composing the same
// resources, with function-auto-ready as the serving floor.
func functionSection(t *testing.T, b *bench) string {
	inproc, cmdline := benchInProcess(t, b.root, inProcessCount)
	t.Logf("in-process: %+v", inproc)

	fnBin := b.build(t, "function-widget", "./function")
	fptBin, farBin := os.Getenv("FUNCTION_PATCH_AND_TRANSFORM_BIN"), os.Getenv("FUNCTION_AUTO_READY_BIN")
	if fptBin == "" || farBin == "" {
		t.Fatal("FUNCTION_PATCH_AND_TRANSFORM_BIN or FUNCTION_AUTO_READY_BIN is unset: run `bash hack/tools.sh all` and eval \"$(bash hack/tools.sh env)\"")
	}
	ours := startFunction(t, "function-widget", fnBin, "--metrics-address=", "--health-probe-address=")
	fpt := startFunction(t, "function-patch-and-transform", fptBin)
	far := startFunction(t, "function-auto-ready", farBin)
	calls := envInt("WIDGET_BENCH_CALLS", 1000)
	grpcRes := make([]grpcResult, 0, 3)
	for _, sc := range []struct {
		name  string
		keys  int
		ready bool
	}{
		{"new XWidget, 3 keys (nothing observed yet)", 3, false},
		{"ready XWidget, 3 keys (steady state)", 3, true},
		{"ready XWidget, 10 keys (the XRD's maximum; steady state)", 10, true},
	} {
		obs := observedState(sc.keys, sc.ready)
		widgetReq := fnRequest(obs, widgetPolicy(sc.keys))
		r := benchGRPC(t, sc.name, calls, grpcRounds,
			v1Target(ours, widgetReq),
			betaTarget(t, fpt, fnRequest(obs, ptResources(sc.keys))),
			// function-auto-ready ignores the input: it gets
			// function-widget's request byte for byte.
			v1Target(far, widgetReq))
		for _, tr := range r.targets {
			t.Logf("grpc %s, %s: p50 %s, p99 %s (per round %s)", sc.name, tr.name, us(tr.p50), us(tr.p99), roundsOf(tr))
		}
		grpcRes = append(grpcRes, r)
	}
	return functionMarkdown(inproc, cmdline, grpcRes, calls)
}

func mustStruct(o map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(o)
	if err != nil {
		panic(err)
	}
	return s
}

func xpCond(typ, status, reason, msg string) map[string]any {
	c := map[string]any{"type": typ, "status": status, "reason": reason, "lastTransitionTime": "2026-01-01T00:00:00Z"}
	if msg != "" {
		c["message"] = msg
	}
	return c
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// The observed XWidget team-a/web and its widget, as the examples have them.
const (
	fnXRName             = "web"
	fnXRNamespace        = "team-a"
	fnWidgetName         = "web-8k2mz"
	fnWidgetExternalName = "team-a-web-8k2mz"
	fnEndpoint           = "https://team-a-web-8k2mz.widgets.example.com"
)

// observedState is what Crossplane observes of the namespaced XWidget
// team-a/web with keys access keys. When ready, the Widget, every WidgetKey
// and the connection Secret exist and are ready, and the XR carries the
// conditions and status function-widget gave it: the steady state every
// later reconcile sees. Otherwise only the XR exists, without status (the
// first call).
func observedState(keys int, ready bool) *fnv1.State {
	xr := map[string]any{
		"apiVersion": "platform.widgetco.io/v1alpha1",
		"kind":       "XWidget",
		"metadata":   map[string]any{"name": fnXRName, "namespace": fnXRNamespace, "uid": "6e6d1b7e-6c2f-4a39-9a57-3c9f7c1d2e10"},
		"spec": map[string]any{
			"size":       "medium",
			"keys":       keys,
			"labels":     map[string]any{"team": "payments"},
			"crossplane": map[string]any{"compositionRef": map[string]any{"name": "xwidgets.platform.widgetco.io"}},
		},
	}
	if !ready {
		return &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(xr)}}
	}
	xr["status"] = map[string]any{
		"endpoint":             fnEndpoint,
		"externalName":         fnWidgetExternalName,
		"widgetState":          "Ready",
		"region":               "us-east-1",
		"keysReady":            fmt.Sprintf("%d/%d", keys, keys),
		"connectionSecretName": fnXRName + "-connection",
		"conditions": []any{
			xpCond("Ready", "True", "Available", ""),
			xpCond("Synced", "True", "ReconcileSuccess", ""),
			xpCond("PolicyCompliant", "True", "Compliant", "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."),
			xpCond("WidgetReady", "True", "Available", fmt.Sprintf("Widget %s is ready at %s.", fnWidgetName, fnEndpoint)),
			xpCond("KeysReady", "True", "Available", fmt.Sprintf("All %d access keys are ready.", keys)),
		},
	}
	readyConds := []any{xpCond("Ready", "True", "Available", ""), xpCond("Synced", "True", "ReconcileSuccess", "")}
	obs := map[string]*fnv1.Resource{"widget": {Resource: mustStruct(map[string]any{
		"apiVersion": "widget.m.widgetco.io/v1beta1",
		"kind":       "Widget",
		"metadata": map[string]any{"name": fnWidgetName, "namespace": fnXRNamespace, "annotations": map[string]any{
			"crossplane.io/composition-resource-name": "widget",
			"crossplane.io/external-name":             fnWidgetExternalName,
		}},
		"spec": map[string]any{"forProvider": map[string]any{"size": "medium"}, "initProvider": map[string]any{"region": "us-east-1"}},
		"status": map[string]any{
			"atProvider": map[string]any{"id": "w-7f3c9a", "state": "Ready", "endpoint": fnEndpoint, "size": "medium", "region": "us-east-1", "generation": 1},
			"conditions": readyConds,
		},
	})}}
	data := map[string]any{"endpoint": b64(fnEndpoint), "widget": b64(fnWidgetExternalName)}
	for i := range keys {
		rn := fmt.Sprintf("key-%d", i)
		name := fmt.Sprintf("web-k%04d", i)
		obs[rn] = &fnv1.Resource{
			Resource: mustStruct(map[string]any{
				"apiVersion": "widget.m.widgetco.io/v1beta1",
				"kind":       "WidgetKey",
				"metadata":   map[string]any{"name": name, "namespace": fnXRNamespace, "annotations": map[string]any{"crossplane.io/composition-resource-name": rn}},
				"spec":       map[string]any{"forProvider": map[string]any{"widgetName": fnWidgetExternalName}},
				"status":     map[string]any{"conditions": readyConds},
			}),
			ConnectionDetails: map[string][]byte{"key": []byte("s3cr3t"), "keyName": []byte("team-a-" + name), "widget": []byte(fnWidgetExternalName), "endpoint": []byte(fnEndpoint)},
		}
		data[rn] = b64("s3cr3t")
		data[rn+"-name"] = b64("team-a-" + name)
	}
	obs["connection-secret"] = &fnv1.Resource{Resource: mustStruct(map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{"name": fnXRName + "-connection", "namespace": fnXRNamespace, "annotations": map[string]any{
			"crossplane.io/composition-resource-name": "connection-secret",
		}},
		"type": "Opaque",
		"data": data,
	})}
	return &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(xr)}, Resources: obs}
}

// fnRequest is a RunFunctionRequest for the observed state obs with the
// supplied input, and the empty desired state Crossplane sends to the first
// step of a pipeline.
func fnRequest(obs *fnv1.State, input map[string]any) *fnv1.RunFunctionRequest {
	req := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "bench"},
		Observed: obs,
		Desired:  &fnv1.State{},
	}
	if input != nil {
		req.Input = mustStruct(input)
	}
	return req
}

// widgetPolicy is function-widget's input: the examples' policy, with
// maxKeys raised to keys.
func widgetPolicy(keys int) map[string]any {
	return map[string]any{
		"apiVersion": "fn.widgetco.io/v1beta1",
		"kind":       "WidgetPolicy",
		"defaults":   map[string]any{"size": "small", "region": "us-east-1", "keys": 1, "labels": map[string]any{"managed-by": "crossplane"}},
		"rules": map[string]any{
			"allowedSizes":   []any{"small", "medium"},
			"allowedRegions": []any{"us-east-1", "eu-west-1"},
			"requiredLabels": []any{"team"},
			"maxKeys":        max(keys, 3),
		},
		"ttl": map[string]any{"converging": "1m", "ready": "10m"},
	}
}

// ptResources is function-patch-and-transform's input composing, as far as
// P&T v0.5.0 can, what function-widget composes under widgetPolicy for a
// namespaced XWidget with keys access keys: see writeFPTConditions.
func ptResources(keys int) map[string]any {
	from := func(from, to string, transforms ...any) map[string]any {
		p := map[string]any{"type": "FromCompositeFieldPath", "fromFieldPath": from, "toFieldPath": to}
		if len(transforms) > 0 {
			p["transforms"] = transforms
		}
		return p
	}
	to := func(from, to string) map[string]any {
		return map[string]any{"type": "ToCompositeFieldPath", "fromFieldPath": from, "toFieldPath": to}
	}
	combine := func(format, to string, from ...string) map[string]any {
		vars := make([]any, 0, len(from))
		for _, f := range from {
			vars = append(vars, map[string]any{"fromFieldPath": f})
		}
		return map[string]any{
			"type":        "CombineFromComposite",
			"combine":     map[string]any{"variables": vars, "strategy": "string", "string": map[string]any{"fmt": format}},
			"toFieldPath": to,
		}
	}
	format := func(f string) map[string]any {
		return map[string]any{"type": "string", "string": map[string]any{"type": "Format", "fmt": f}}
	}
	toBase64 := map[string]any{"type": "string", "string": map[string]any{"type": "Convert", "convert": "ToBase64"}}
	readyCondition := []any{map[string]any{"type": "MatchCondition", "matchCondition": map[string]any{"type": "Ready", "status": "True"}}}
	providerConfig := map[string]any{"kind": "ClusterProviderConfig", "name": "default"}
	const externalName = "metadata.annotations[crossplane.io/external-name]"

	resources := []any{map[string]any{
		"name": "widget",
		"base": map[string]any{
			"apiVersion": "widget.m.widgetco.io/v1beta1",
			"kind":       "Widget",
			"metadata":   map[string]any{"labels": map[string]any{"fn.widgetco.io/component": "widget"}},
			"spec": map[string]any{
				"providerConfigRef": providerConfig,
				"forProvider":       map[string]any{"size": "small", "labels": map[string]any{"managed-by": "crossplane"}},
				"initProvider":      map[string]any{"region": "us-east-1"},
			},
		},
		"patches": []any{
			from("spec.size", "spec.forProvider.size"),
			from("spec.region", "spec.initProvider.region"),
			func() map[string]any {
				p := from("spec.labels", "spec.forProvider.labels")
				p["policy"] = map[string]any{"toFieldPath": "ForceMergeObjects"} // the XR's labels win
				return p
			}(),
			combine("XWidget %s/%s, managed by Crossplane", "spec.initProvider.description", "metadata.namespace", "metadata.name"),
			from("spec.description", "spec.forProvider.description"),
			to("status.atProvider.endpoint", "status.endpoint"),
			to("status.atProvider.state", "status.widgetState"),
			to(externalName, "status.externalName"),
			to("status.atProvider.region", "status.region"),
		},
		"connectionDetails": []any{
			map[string]any{"name": "endpoint", "type": "FromFieldPath", "fromFieldPath": "status.atProvider.endpoint"},
			map[string]any{"name": "widget", "type": "FromFieldPath", "fromFieldPath": externalName},
		},
		"readinessChecks": readyCondition,
	}}
	for i := range keys {
		widgetName := from("status.externalName", "spec.forProvider.widgetName")
		widgetName["policy"] = map[string]any{"fromFieldPath": "Required"} // keys wait for the widget
		resources = append(resources, map[string]any{
			"name": fmt.Sprintf("key-%d", i),
			"base": map[string]any{
				"apiVersion": "widget.m.widgetco.io/v1beta1",
				"kind":       "WidgetKey",
				"spec":       map[string]any{"providerConfigRef": providerConfig},
			},
			"patches": []any{
				widgetName,
				combine(fmt.Sprintf("Access key %d of XWidget %%s/%%s, managed by Crossplane", i), "spec.initProvider.description", "metadata.namespace", "metadata.name"),
				from("metadata.name", "spec.writeConnectionSecretToRef.name", format(fmt.Sprintf("%%s-key-%d", i))),
			},
			"connectionDetails": []any{
				map[string]any{"name": fmt.Sprintf("key-%d", i), "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "key"},
				map[string]any{"name": fmt.Sprintf("key-%d-name", i), "type": "FromConnectionSecretKey", "fromConnectionSecretKey": "keyName"},
			},
			"readinessChecks": readyCondition,
		})
	}
	resources = append(resources, map[string]any{
		"name": "connection-secret",
		"base": map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque"},
		"patches": []any{
			from("metadata.name", "metadata.name", format("%s-connection")),
			from("status.endpoint", "data.endpoint", toBase64),
			from("status.externalName", "data.widget", toBase64),
			to("metadata.name", "status.connectionSecretName"),
		},
		"readinessChecks": []any{map[string]any{"type": "None"}},
	})
	return map[string]any{"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": resources}
}
