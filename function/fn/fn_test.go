package fn

import (
	"context"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestRunFunction walks an XWidget of each flavour through its life, one
// call per stage, and checks the whole response of each call.
func TestRunFunction(t *testing.T) {
	converging := durationpb.New(time.Minute)
	steady := durationpb.New(10 * time.Minute)
	// While a response composes a resource Crossplane has not observed.
	creating := durationpb.New(5 * time.Second)

	secret := map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":        "web-connection",
			"namespace":   "team-a",
			"annotations": map[string]any{"crossplane.io/composition-resource-name": "connection-secret"},
		},
	}
	nsKeyDetails := func(i int) map[string][]byte {
		return keyDetails([]string{"team-a-web-q2w7d", "team-a-web-m5n8c"}[i], []string{"s3cr3t-0", "s3cr3t-1"}[i], "team-a-web-8k2mz", nsEndpoint)
	}

	// The conditions the XR has after each stage, as Crossplane records them.
	afterNew := conditions(
		xpCondition("PolicyCompliant", "True", "Compliant", nsCompliant),
		xpCondition("WidgetReady", "False", "Creating", "Creating the widget."),
		xpCondition("KeysReady", "False", "WaitingForWidget", "0 of 2 access keys ready; waiting for the widget to be created."),
	)
	afterWidgetReady := conditions(
		xpCondition("PolicyCompliant", "True", "Compliant", nsCompliant),
		xpCondition("WidgetReady", "True", "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
		xpCondition("KeysReady", "False", "Creating", "0 of 2 access keys ready; creating access key 0."),
	)
	afterKeysReady := conditions(
		xpCondition("PolicyCompliant", "True", "Compliant", nsCompliant),
		xpCondition("WidgetReady", "True", "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
		xpCondition("KeysReady", "True", "Available", "All 2 access keys are ready."),
	)

	readyStatus := map[string]any{
		"endpoint":             nsEndpoint,
		"externalName":         "team-a-web-8k2mz",
		"widgetState":          "Ready",
		"region":               "us-east-1",
		"keysReady":            "0/2",
		"connectionSecretName": "web-connection",
	}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := make(map[string]any, len(m)+1)
		for kk, vv := range m {
			out[kk] = vv
		}
		out[k] = v
		return out
	}
	keysReadySecret := map[string]any{
		"endpoint":   b64(nsEndpoint),
		"widget":     b64("team-a-web-8k2mz"),
		"key-0":      b64("s3cr3t-0"),
		"key-0-name": b64("team-a-web-q2w7d"),
		"key-1":      b64("s3cr3t-1"),
		"key-1-name": b64("team-a-web-m5n8c"),
	}

	invalidInput := "The platform's WidgetPolicy (the function input of the Composition) is invalid, so no XWidget can be composed; the platform team must fix it: " +
		field.NotSupported(field.NewPath("kind"), "Input", []string{"WidgetPolicy"}).Error()
	violation := "XWidget team-a/web violates the platform's widget policy; change these fields: " +
		field.NotSupported(field.NewPath("spec", "size"), "large", []string{"small", "medium"}).Error() + "; " +
		field.Invalid(field.NewPath("spec", "keys"), 5, "the platform allows 0 to 3 access keys").Error() + "; " +
		field.Required(field.NewPath("spec", "labels").Key("team"), "the platform requires every widget to have this label").Error()
	badXR := func(mods ...mod) map[string]any {
		return build(nsXR(set("spec.size", "large"), set("spec.keys", 5), set("spec.labels", map[string]any{"owner": "payments"})), mods...)
	}

	type want struct {
		rsp *fnv1.RunFunctionResponse
		err error
	}
	cases := map[string]struct {
		reason string
		req    testRequest
		want   want
	}{
		"NewNamespacedXR": {
			reason: "A new namespaced XR should get a namespaced Widget, its WidgetKeys with it (the provider has them wait for the widget) and a connection Secret in its namespace, conditions saying the widget is being created and the keys wait for it, and a result for each condition, which changed.",
			req:    testRequest{xr: nsXR(), input: policyInput()},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: xrStatus(map[string]any{"connectionSecretName": "web-connection"}),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyFalse),
						"key-0":             desired(wantNSKey(0), readyFalse),
						"key-1":             desired(wantNSKey(1), readyFalse),
						"connection-secret": desired(wantNSSecret(nil), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condFalse, "Creating", "Creating the widget."),
					wantCondition("KeysReady", condFalse, "WaitingForWidget", "0 of 2 access keys ready; waiting for the widget to be created."),
				},
				Results: []*fnv1.Result{
					result(sevNormal, "Compliant", nsCompliant),
					result(sevNormal, "Creating", "Creating the widget."),
					result(sevNormal, "WaitingForWidget", "0 of 2 access keys ready; waiting for the widget to be created."),
				},
			}},
		},
		"WidgetProvisioning": {
			reason: "While the Widget API provisions the widget, WidgetReady should say so, the XR's status should show the widget's name, state and region, KeysReady should say which key is being created now that the widget has its ID, and only the changed conditions should produce results.",
			req: testRequest{
				xr:    nsXR(afterNew),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{
					"widget": observed(nsWidget(), nil),
					"key-0":  observed(nsKey(0), nil),
					"key-1":  observed(nsKey(1), nil),
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: xrStatus(map[string]any{"externalName": "team-a-web-8k2mz", "widgetState": "Provisioning", "region": "us-east-1", "keysReady": "0/2", "connectionSecretName": "web-connection"}),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyFalse),
						"key-0":             desired(wantNSKey(0), readyFalse),
						"key-1":             desired(wantNSKey(1), readyFalse),
						"connection-secret": desired(wantNSSecret(map[string]any{"widget": b64("team-a-web-8k2mz")}), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condFalse, "Provisioning", "Widget web-8k2mz is being provisioned."),
					wantCondition("KeysReady", condFalse, "Creating", "0 of 2 access keys ready; creating access key 0."),
				},
				Results: []*fnv1.Result{
					result(sevNormal, "Provisioning", "Widget web-8k2mz is being provisioned."),
					result(sevNormal, "Creating", "0 of 2 access keys ready; creating access key 0."),
				},
			}},
		},
		"WidgetReadyKeysCreated": {
			reason: "Once the widget is ready it should be marked ready, its endpoint should reach the status and the connection Secret, and its access keys should be composed.",
			req: testRequest{
				xr:    nsXR(afterNew),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{
					"widget":            observed(nsWidget(widgetReady(nsEndpoint)), nil),
					"connection-secret": observed(secret, nil),
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: xrStatus(readyStatus),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyTrue),
						"key-0":             desired(wantNSKey(0), readyFalse),
						"key-1":             desired(wantNSKey(1), readyFalse),
						"connection-secret": desired(wantNSSecret(map[string]any{"endpoint": b64(nsEndpoint), "widget": b64("team-a-web-8k2mz")}), readyTrue),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condTrue, "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
					wantCondition("KeysReady", condFalse, "Creating", "0 of 2 access keys ready; creating access key 0."),
				},
				Results: []*fnv1.Result{
					result(sevNormal, "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
					result(sevNormal, "Creating", "0 of 2 access keys ready; creating access key 0."),
				},
			}},
		},
		"KeysPending": {
			reason: "Access keys whose connection details are not published yet should not be ready, and the XR should say which key it waits for; KeysReady keeps its reason and message, so there should be no result.",
			req: testRequest{
				xr:    nsXR(afterWidgetReady),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{
					"widget":            observed(nsWidget(widgetReady(nsEndpoint)), nil),
					"key-0":             observed(nsKey(0), nil),
					"key-1":             observed(nsKey(1), nil),
					"connection-secret": observed(secret, nil),
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
				Desired: &fnv1.State{
					Composite: xrStatus(readyStatus),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyTrue),
						"key-0":             desired(wantNSKey(0), readyFalse),
						"key-1":             desired(wantNSKey(1), readyFalse),
						"connection-secret": desired(wantNSSecret(map[string]any{"endpoint": b64(nsEndpoint), "widget": b64("team-a-web-8k2mz")}), readyTrue),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condTrue, "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
					wantCondition("KeysReady", condFalse, "Creating", "0 of 2 access keys ready; creating access key 0."),
				},
			}},
		},
		"KeysReady": {
			reason: "Access keys with connection details should be ready and reach the connection Secret; with everything ready the TTL should be the long one.",
			req: testRequest{
				xr:    nsXR(afterWidgetReady),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{
					"widget":            observed(nsWidget(widgetReady(nsEndpoint)), nil),
					"key-0":             observed(nsKey(0), nsKeyDetails(0)),
					"key-1":             observed(nsKey(1), nsKeyDetails(1)),
					"connection-secret": observed(secret, nil),
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: steady},
				Desired: &fnv1.State{
					Composite: xrStatus(with(readyStatus, "keysReady", "2/2")),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyTrue),
						"key-0":             desired(wantNSKey(0), readyTrue),
						"key-1":             desired(wantNSKey(1), readyTrue),
						"connection-secret": desired(wantNSSecret(keysReadySecret), readyTrue),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condTrue, "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
					wantCondition("KeysReady", condTrue, "Available", "All 2 access keys are ready."),
				},
				Results: []*fnv1.Result{result(sevNormal, "Available", "All 2 access keys are ready.")},
			}},
		},
		"Steady": {
			reason: "A ready XR whose conditions do not change should get the same desired state, no results, and the long TTL.",
			req: testRequest{
				xr:    nsXR(afterKeysReady),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{
					"widget":            observed(nsWidget(widgetReady(nsEndpoint)), nil),
					"key-0":             observed(nsKey(0), nsKeyDetails(0)),
					"key-1":             observed(nsKey(1), nsKeyDetails(1)),
					"connection-secret": observed(secret, nil),
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: steady},
				Desired: &fnv1.State{
					Composite: xrStatus(with(readyStatus, "keysReady", "2/2")),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyTrue),
						"key-0":             desired(wantNSKey(0), readyTrue),
						"key-1":             desired(wantNSKey(1), readyTrue),
						"connection-secret": desired(wantNSSecret(keysReadySecret), readyTrue),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condTrue, "Available", "Widget web-8k2mz is ready at "+nsEndpoint+"."),
					wantCondition("KeysReady", condTrue, "Available", "All 2 access keys are ready."),
				},
			}},
		},
		"WidgetReconcileError": {
			reason: "When the provider cannot reconcile the Widget, its own message should reach the XR's and the claim's WidgetReady condition, with a warning result; keys that do not exist yet wait for the provider to reconcile the widget.",
			req: testRequest{
				xr:    nsXR(afterNew),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{"widget": observed(nsWidget(
					unset("status.atProvider"),
					conditions(xpCondition("Synced", "False", "ReconcileError", "create failed: cannot create widget: invalid (422): region: region us-east-1 is full")),
				), nil)},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: xrStatus(map[string]any{"externalName": "team-a-web-8k2mz", "keysReady": "0/2", "connectionSecretName": "web-connection"}),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyFalse),
						"connection-secret": desired(wantNSSecret(map[string]any{"widget": b64("team-a-web-8k2mz")}), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condFalse, "ReconcileError", "The provider cannot reconcile Widget web-8k2mz: create failed: cannot create widget: invalid (422): region: region us-east-1 is full"),
					wantCondition("KeysReady", condFalse, "WaitingForWidget", "0 of 2 access keys ready; access keys are created once the provider can reconcile the widget (WidgetReady says why it cannot)."),
				},
				Results: []*fnv1.Result{
					result(sevWarning, "ReconcileError", "The provider cannot reconcile Widget web-8k2mz: create failed: cannot create widget: invalid (422): region: region us-east-1 is full"),
				},
			}},
		},
		"WidgetFailed": {
			reason: "A widget the Widget API failed to provision should make WidgetReady False with the API's message and what to do, with a warning result.",
			req: testRequest{
				xr:    nsXR(afterNew),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{"widget": observed(nsWidget(
					set("status.atProvider.state", "Failed"),
					set("status.atProvider.message", "no capacity left in us-east-1"),
					conditions(xpCondition("Ready", "False", "Unavailable", "no capacity left in us-east-1"), xpCondition("Synced", "True", "ReconcileSuccess", "")),
				), nil)},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: xrStatus(map[string]any{"externalName": "team-a-web-8k2mz", "widgetState": "Failed", "region": "us-east-1", "keysReady": "0/2", "connectionSecretName": "web-connection"}),
					Resources: map[string]*fnv1.Resource{
						"widget":            desired(wantNSWidget(), readyFalse),
						"connection-secret": desired(wantNSSecret(map[string]any{"widget": b64("team-a-web-8k2mz")}), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condFalse, "Failed", "Widget web-8k2mz failed: no capacity left in us-east-1. Delete and recreate the XWidget to try again; ask the platform team if it fails again."),
					wantCondition("KeysReady", condFalse, "WaitingForWidget", "0 of 2 access keys ready; no access key is created for a widget that failed."),
				},
				Results: []*fnv1.Result{
					result(sevWarning, "Failed", "Widget web-8k2mz failed: no capacity left in us-east-1. Delete and recreate the XWidget to try again; ask the platform team if it fails again."),
				},
			}},
		},
		"InvalidInput": {
			reason: "An invalid function input should be a fatal result, after a PolicyCompliant condition and a warning result, targeted at the XR and the claim, that say it is the platform team's to fix; the desired state should be left as it was.",
			req:    testRequest{xr: nsXR(afterNew), input: policyInput(set("kind", "Input"))},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta:       &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
				Conditions: []*fnv1.Condition{wantCondition("PolicyCompliant", condFalse, "InvalidFunctionInput", invalidInput)},
				Results:    []*fnv1.Result{result(sevWarning, "InvalidFunctionInput", invalidInput), fatal(invalidInput)},
			}},
		},
		"PolicyViolation": {
			reason: "An XR that violates the policy should be a fatal result naming every offending field and what is allowed, after a PolicyCompliant condition and a warning result that say the same to the XR and the claim.",
			req:    testRequest{xr: badXR(), input: policyInput()},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta:       &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
				Conditions: []*fnv1.Condition{wantCondition("PolicyCompliant", condFalse, "PolicyViolation", violation)},
				Results:    []*fnv1.Result{result(sevWarning, "PolicyViolation", violation), fatal(violation)},
			}},
		},
		"PolicyViolationUnchanged": {
			reason: "An XR that already has the PolicyViolation condition should get the condition and the fatal result again, but no warning result: events mark transitions.",
			req: testRequest{
				xr:    badXR(conditions(xpCondition("PolicyCompliant", "False", "PolicyViolation", violation))),
				input: policyInput(),
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta:       &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
				Conditions: []*fnv1.Condition{wantCondition("PolicyCompliant", condFalse, "PolicyViolation", violation)},
				Results:    []*fnv1.Result{fatal(violation)},
			}},
		},
		"NewLegacyXR": {
			reason: "A new legacy XR should get a cluster-scoped Widget and its WidgetKey using the cluster-scoped ProviderConfig, no Secret, and conditions that name its claim.",
			req:    testRequest{xr: legacyXR(), input: policyInput()},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{}`)},
					Resources: map[string]*fnv1.Resource{
						"widget": desired(wantLegacyWidget(), readyFalse),
						"key-0":  desired(wantLegacyKey(), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", lgCompliant),
					wantCondition("WidgetReady", condFalse, "Creating", "Creating the widget."),
					wantCondition("KeysReady", condFalse, "WaitingForWidget", "0 of 1 access key ready; waiting for the widget to be created."),
				},
				Results: []*fnv1.Result{
					result(sevNormal, "Compliant", lgCompliant),
					result(sevNormal, "Creating", "Creating the widget."),
					result(sevNormal, "WaitingForWidget", "0 of 1 access key ready; waiting for the widget to be created."),
				},
			}},
		},
		"LegacyXRReady": {
			reason: "A legacy XR whose widget and key are ready should return the endpoint and key as its own connection details, for Crossplane to write to the claim's connection secret; its keys write their secrets to the policy's namespace.",
			req: testRequest{
				xr:    legacyXR(),
				input: policyInput(),
				observed: map[string]*fnv1.Resource{
					"widget": observed(legacyWidget(), nil),
					"key-0":  observed(legacyKey(), keyDetails("web-5t2xq-b4r6s", "s3cr3t", "web-5t2xq-h7kzp", lgEndpoint)),
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: steady},
				Desired: &fnv1.State{
					Composite: &fnv1.Resource{
						Resource: resource.MustStructObject(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
							"endpoint": lgEndpoint, "externalName": "web-5t2xq-h7kzp", "widgetState": "Ready", "region": "eu-west-1", "keysReady": "1/1",
						}}}),
						ConnectionDetails: map[string][]byte{
							"endpoint":   []byte(lgEndpoint),
							"widget":     []byte("web-5t2xq-h7kzp"),
							"key-0":      []byte("s3cr3t"),
							"key-0-name": []byte("web-5t2xq-b4r6s"),
						},
					},
					Resources: map[string]*fnv1.Resource{
						"widget": desired(wantLegacyWidget(), readyTrue),
						"key-0":  desired(wantLegacyKey(), readyTrue),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", lgCompliant),
					wantCondition("WidgetReady", condTrue, "Available", "Widget web-5t2xq-h7kzp is ready at "+lgEndpoint+"."),
					wantCondition("KeysReady", condTrue, "Available", "The access key is ready."),
				},
				Results: []*fnv1.Result{
					result(sevNormal, "Compliant", lgCompliant),
					result(sevNormal, "Available", "Widget web-5t2xq-h7kzp is ready at "+lgEndpoint+"."),
					result(sevNormal, "Available", "The access key is ready."),
				},
			}},
		},
		"PassThrough": {
			reason: "Resources, XR status fields and connection details that earlier pipeline steps desire should be passed through untouched.",
			req: testRequest{
				xr:    nsXR(afterNew),
				input: policyInput(),
				desired: &fnv1.State{
					Composite: &fnv1.Resource{
						Resource:          resource.MustStructJSON(`{"status": {"fromEarlierStep": "kept"}}`),
						ConnectionDetails: map[string][]byte{"earlier": []byte("kept")},
					},
					Resources: map[string]*fnv1.Resource{
						"bucket": {Resource: resource.MustStructJSON(`{"apiVersion": "example.org/v1", "kind": "Bucket"}`), Ready: readyTrue},
					},
				},
			},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: &fnv1.Resource{
						Resource:          resource.MustStructJSON(`{"status": {"fromEarlierStep": "kept", "connectionSecretName": "web-connection"}}`),
						ConnectionDetails: map[string][]byte{"earlier": []byte("kept")},
					},
					Resources: map[string]*fnv1.Resource{
						"bucket":            {Resource: resource.MustStructJSON(`{"apiVersion": "example.org/v1", "kind": "Bucket"}`), Ready: readyTrue},
						"widget":            desired(wantNSWidget(), readyFalse),
						"key-0":             desired(wantNSKey(0), readyFalse),
						"key-1":             desired(wantNSKey(1), readyFalse),
						"connection-secret": desired(wantNSSecret(nil), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condFalse, "Creating", "Creating the widget."),
					wantCondition("KeysReady", condFalse, "WaitingForWidget", "0 of 2 access keys ready; waiting for the widget to be created."),
				},
			}},
		},
		"NoInput": {
			reason: "Without input the function should use its built-in defaults: no region, so the Widget API chooses, and no extra labels.",
			req:    testRequest{xr: nsXR(afterNew)},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta: &fnv1.ResponseMeta{Tag: "tag", Ttl: creating},
				Desired: &fnv1.State{
					Composite: xrStatus(map[string]any{"connectionSecretName": "web-connection"}),
					Resources: map[string]*fnv1.Resource{
						"widget": desired(build(wantNSWidget(),
							unset("spec.initProvider"),
							set("spec.forProvider.labels", map[string]any{"team": "payments"}),
						), readyFalse),
						"key-0":             desired(wantNSKey(0), readyFalse),
						"key-1":             desired(wantNSKey(1), readyFalse),
						"connection-secret": desired(wantNSSecret(nil), readyFalse),
					},
				},
				Conditions: []*fnv1.Condition{
					wantCondition("PolicyCompliant", condTrue, "Compliant", nsCompliant),
					wantCondition("WidgetReady", condFalse, "Creating", "Creating the widget."),
					wantCondition("KeysReady", condFalse, "WaitingForWidget", "0 of 2 access keys ready; waiting for the widget to be created."),
				},
			}},
		},
		"ClusterScopedV2XR": {
			reason: "A v2 XR of scope Cluster, which neither flavour fits, should be a fatal result that says which scopes are supported.",
			req:    testRequest{xr: nsXR(unset("metadata.namespace")), input: policyInput()},
			want: want{rsp: &fnv1.RunFunctionResponse{
				Meta:       &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
				Conditions: []*fnv1.Condition{wantCondition("PolicyCompliant", condFalse, "UnsupportedComposite", clusterScopeMessage)},
				Results:    []*fnv1.Result{result(sevWarning, "UnsupportedComposite", clusterScopeMessage), fatal(clusterScopeMessage)},
			}},
		},
	}

	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := f.RunFunction(context.Background(), tc.req.build())

			// Requirements are the namespace policy's concern: nspolicy_test.go.
			if diff := cmp.Diff(tc.want.rsp, rsp, protocmp.Transform(), protocmp.IgnoreFields(&fnv1.RunFunctionResponse{}, "requirements")); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want rsp, +got rsp:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want err, +got err:\n%s", tc.reason, diff)
			}
		})
	}
}

const clusterScopeMessage = "XWidget web is a cluster-scoped (scope Cluster) composite resource; function-widget composes composite resources of scope Namespaced (apiextensions.crossplane.io/v2) and LegacyCluster (apiextensions.crossplane.io/v1, with claims): use one of those in the CompositeResourceDefinition"
