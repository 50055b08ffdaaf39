package fn

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
)

// keep are the management policies of a composed resource that outlives
// its XR, as a test reads them back.
var keep = []any{"Observe", "Create", "Update", "LateInitialize"}

func TestOnDelete(t *testing.T) {
	ready := func(i int) map[string][]byte {
		return keyDetails([]string{"team-a-web-q2w7d", "team-a-web-m5n8c"}[i], "s3cr3t", "team-a-web-8k2mz", nsEndpoint)
	}
	type want struct {
		// policies of each desired composed resource; nil for unset.
		policies map[string]any
		// status is status.onDelete of the desired XR; "" for unset.
		status string
		fatal  string
	}
	cases := map[string]struct {
		reason string
		req    testRequest
		want   want
	}{
		"Default": {
			reason: "An XWidget that says nothing deletes its widget: policies are left to the CRD's default and the status says nothing.",
			req: testRequest{xr: nsXR(), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil),
				"key-0":  observed(nsKey(0), ready(0)),
				"key-1":  observed(nsKey(1), ready(1)),
			}},
			want: want{policies: map[string]any{"widget": nil, "key-0": nil, "key-1": nil, "connection-secret": nil}},
		},
		"KeepWidgetNew": {
			reason: "KeepWidget composes the Widget without Delete and its keys, composed with it, with the default policies (they revoke their keys); until the Widget exists the status says nothing.",
			req:    testRequest{xr: nsXR(set("spec.onDelete", "KeepWidget")), input: policyInput()},
			want:   want{policies: map[string]any{"widget": keep, "key-0": nil, "key-1": nil, "connection-secret": nil}},
		},
		"KeepWidgetAndKeysNew": {
			reason: "KeepWidgetAndKeys composes the Widget and the keys composed with it without Delete from the first composition on.",
			req:    testRequest{xr: nsXR(set("spec.onDelete", "KeepWidgetAndKeys")), input: policyInput()},
			want:   want{policies: map[string]any{"widget": keep, "key-0": keep, "key-1": keep, "connection-secret": nil}},
		},
		"KeepWidgetApplied": {
			reason: "Once the observed Widget keeps its widget and the keys still revoke theirs, the status says KeepWidget.",
			req: testRequest{xr: nsXR(set("spec.onDelete", "KeepWidget")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(widgetReady(nsEndpoint), set("spec.managementPolicies", keep)), nil),
				"key-0":  observed(nsKey(0), ready(0)),
				"key-1":  observed(nsKey(1), ready(1)),
			}},
			want: want{policies: map[string]any{"widget": keep, "key-0": nil, "key-1": nil, "connection-secret": nil}, status: "KeepWidget"},
		},
		"KeepWidgetAndKeysPending": {
			reason: "Asking to keep the keys too: the status says KeepWidget while an observed WidgetKey would still revoke its key.",
			req: testRequest{xr: nsXR(set("spec.onDelete", "KeepWidgetAndKeys")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(widgetReady(nsEndpoint), set("spec.managementPolicies", keep)), nil),
				"key-0":  observed(nsKey(0, set("spec.managementPolicies", keep)), ready(0)),
				"key-1":  observed(nsKey(1), ready(1)),
			}},
			want: want{policies: map[string]any{"widget": keep, "key-0": keep, "key-1": keep, "connection-secret": nil}, status: "KeepWidget"},
		},
		"KeepWidgetAndKeysApplied": {
			reason: "Once every observed resource keeps its external resource, the status says KeepWidgetAndKeys.",
			req: testRequest{xr: nsXR(set("spec.onDelete", "KeepWidgetAndKeys")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(widgetReady(nsEndpoint), set("spec.managementPolicies", keep)), nil),
				"key-0":  observed(nsKey(0, set("spec.managementPolicies", keep)), ready(0)),
				"key-1":  observed(nsKey(1, set("spec.managementPolicies", keep)), ready(1)),
			}},
			want: want{policies: map[string]any{"widget": keep, "key-0": keep, "key-1": keep, "connection-secret": nil}, status: "KeepWidgetAndKeys"},
		},
		"BackToDelete": {
			reason: "Switching back to Delete unsets the policies (the CRD's default, [\"*\"], applies); while the Widget still keeps, the status says so.",
			req: testRequest{xr: nsXR(set("spec.onDelete", "Delete")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(widgetReady(nsEndpoint), set("spec.managementPolicies", keep)), nil),
				"key-0":  observed(nsKey(0), ready(0)),
				"key-1":  observed(nsKey(1), ready(1)),
			}},
			want: want{policies: map[string]any{"widget": nil, "key-0": nil, "key-1": nil, "connection-secret": nil}, status: "KeepWidget"},
		},
		"Legacy": {
			reason: "A claim's cluster-scoped Widget gets the same policies: management policies, not the deprecated deletionPolicy.",
			req: testRequest{xr: legacyXR(set("spec.onDelete", "KeepWidgetAndKeys")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(legacyWidget(set("spec.managementPolicies", keep)), nil),
				"key-0":  observed(legacyKey(set("spec.managementPolicies", keep)), keyDetails("web-5t2xq-b4r6s", "s3cr3t", "web-5t2xq-h7kzp", lgEndpoint)),
			}},
			want: want{policies: map[string]any{"widget": keep, "key-0": keep}, status: "KeepWidgetAndKeys"},
		},
		"Invalid": {
			reason: "A value the XRD's enum would reject is a fatal result naming the field, and nothing is composed.",
			req:    testRequest{xr: nsXR(set("spec.onDelete", "Orphan")), input: policyInput()},
			want:   want{fatal: `spec.onDelete: Unsupported value: "Orphan": supported values: "Delete", "KeepWidget", "KeepWidgetAndKeys"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := NewFunction()
			if err != nil {
				t.Fatal(err)
			}
			rsp, err := f.RunFunction(t.Context(), tc.req.build())
			if err != nil {
				t.Fatal(err)
			}
			if rejected(t, tc.reason, rsp, tc.want.fatal) {
				return
			}
			got := map[string]any{}
			for n, r := range rsp.GetDesired().GetResources() {
				spec, _ := r.GetResource().AsMap()["spec"].(map[string]any)
				got[n] = spec["managementPolicies"]
			}
			if diff := cmp.Diff(tc.want.policies, got); diff != "" {
				t.Errorf("%s\nmanagement policies: -want, +got:\n%s", tc.reason, diff)
			}
			st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
			if got, _ := st["onDelete"].(string); got != tc.want.status {
				t.Errorf("%s\nstatus.onDelete: want %q, got %q", tc.reason, tc.want.status, got)
			}
		})
	}
}
