package fn

import (
	"strconv"
	"strings"
	"testing"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
)

func adoptInput(extra string) *structpb.Struct {
	return resource.MustStructJSON(`{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "AdoptWidgets", "inventory": {"namespace": "team-a", "name": "all"}, "composite": {"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget"}` + extra + `}`)
}

// inventoryJSON is a Ready WidgetInventory of team-a listing widgets.
func inventoryJSON(ready string, widgets string, unowned int) *fnv1.Resources {
	return &fnv1.Resources{Items: []*fnv1.Resource{{Resource: resource.MustStructJSON(`{"apiVersion": "widget.m.widgetco.io/v1beta1", "kind": "WidgetInventory", "metadata": {"namespace": "team-a", "name": "all"},
		"status": {"conditions": [{"type": "Ready", "status": "` + ready + `", "reason": "Available", "lastTransitionTime": "2026-11-29T10:00:00Z"}],
		"atProvider": {"widgets": ` + widgets + `, "unowned": ` + strconv.Itoa(unowned) + `}}}`)}}}
}

func TestAdoptWidgets(t *testing.T) {
	listed := `[{"name": "legacy-web", "owner": "Unowned", "size": "large", "labels": {"app": "legacy"}},
		{"name": "legacy-db", "owner": "Unowned", "size": "small"},
		{"name": "taken", "owner": "Unowned"},
		{"name": "kept", "owner": "ReleasedHere", "size": "medium"},
		{"name": "mine", "owner": "ManagedHere", "managedBy": "web"}]`
	existing := &fnv1.Resources{Items: []*fnv1.Resource{
		{Resource: resource.MustStructJSON(`{"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "metadata": {"namespace": "team-a", "name": "reviewing"}, "spec": {"adopt": {"name": "legacy-db", "mode": "Review"}}}`)},
		{Resource: resource.MustStructJSON(`{"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "metadata": {"namespace": "team-a", "name": "taken"}, "spec": {}}`)},
	}}
	cases := map[string]struct {
		reason string
		req    *fnv1.RunFunctionRequest
		// want are the written XWidgets' specs by name, as JSON.
		want    map[string]string
		fatal   string
		normal  string
		noAsk   bool
		outputs map[string]any
	}{
		"AsksForInventory": {
			reason: "The first call asks for the inventory and the namespace's XWidgets.",
			req:    &fnv1.RunFunctionRequest{Input: adoptInput("")},
		},
		"Writes": {
			reason: "Each unowned widget, and each released here, gets an XWidget named after it that reviews it, with its size and labels and no keys; one already adopted and one whose name is taken are skipped; a managed one is not a candidate.",
			req: &fnv1.RunFunctionRequest{Input: adoptInput(""), RequiredResources: map[string]*fnv1.Resources{
				reqInventory: inventoryJSON("True", listed, 3), reqComposites: existing}},
			want: map[string]string{
				"team-a/legacy-web": `{"adopt":{"mode":"Review","name":"legacy-web"},"keys":0,"labels":{"app":"legacy"},"size":"large"}`,
				"team-a/kept":       `{"adopt":{"mode":"Review","name":"kept"},"keys":0,"size":"medium"}`,
			},
			normal:  "Wrote 2 XWidget objects in team-a that review the widgets they adopt (mode Review: nothing is changed until an app team sets mode Manage); skipped 1 already adopted, 1 whose name an object there has",
			outputs: map[string]any{"written": float64(2), "alreadyAdopting": []any{"legacy-db"}, "nameTaken": []any{"taken"}},
		},
		"Labels": {
			reason: "The input's labels go over the widget's own, so that the platform's required labels are there.",
			req: &fnv1.RunFunctionRequest{Input: adoptInput(`, "labels": {"team": "payments", "app": "web"}`), RequiredResources: map[string]*fnv1.Resources{
				reqInventory: inventoryJSON("True", `[{"name": "one", "owner": "Unowned", "labels": {"app": "legacy", "tier": "1"}}]`, 1), reqComposites: {}}},
			want:    map[string]string{"team-a/one": `{"adopt":{"mode":"Review","name":"one"},"keys":0,"labels":{"app":"web","team":"payments","tier":"1"}}`},
			normal:  "Wrote 1 XWidget objects in team-a that review the widgets they adopt (mode Review: nothing is changed until an app team sets mode Manage); skipped 0 already adopted, 0 whose name an object there has",
			outputs: map[string]any{"written": float64(1)},
		},
		"BeyondTheInventorysLimit": {
			reason: "Unowned widgets the inventory counted but did not list are reported, with what to do.",
			req: &fnv1.RunFunctionRequest{Input: adoptInput(""), RequiredResources: map[string]*fnv1.Resources{
				reqInventory: inventoryJSON("True", `[{"name": "one", "owner": "Unowned"}]`, 5), reqComposites: {}}},
			want:    map[string]string{"team-a/one": `{"adopt":{"mode":"Review","name":"one"},"keys":0}`},
			normal:  "Wrote 1 XWidget objects in team-a that review the widgets they adopt (mode Review: nothing is changed until an app team sets mode Manage); skipped 0 already adopted, 0 whose name an object there has; 4 more unowned widgets are beyond the inventory's limit: raise spec.forProvider.limit and run again",
			outputs: map[string]any{"written": float64(1), "unownedUnlisted": float64(4)},
		},
		"NoInventory": {
			reason: "A missing inventory fails the step, saying what to do.",
			req:    &fnv1.RunFunctionRequest{Input: adoptInput(""), RequiredResources: map[string]*fnv1.Resources{reqInventory: {}, reqComposites: {}}},
			fatal:  "WidgetInventory team-a/all does not exist",
		},
		"NotReady": {
			reason: "An inventory that has not listed the project yet fails the step.",
			req:    &fnv1.RunFunctionRequest{Input: adoptInput(""), RequiredResources: map[string]*fnv1.Resources{reqInventory: inventoryJSON("False", "[]", 0), reqComposites: {}}},
			fatal:  "WidgetInventory team-a/all is not Ready",
		},
		"OverTheBound": {
			reason: "More to adopt than maxWidgets writes nothing.",
			req: &fnv1.RunFunctionRequest{Input: adoptInput(`, "maxWidgets": 1`), RequiredResources: map[string]*fnv1.Resources{
				reqInventory: inventoryJSON("True", listed, 3), reqComposites: existing}},
			fatal: "WidgetInventory team-a/all lists 2 widgets to adopt, more than maxWidgets (1): nothing was written",
		},
		"Invalid": {
			reason: "Every mistake is named at once, before anything is asked for.",
			req:    &fnv1.RunFunctionRequest{Input: resource.MustStructJSON(`{"apiVersion": "fn.widgetco.io/v1beta1", "kind": "AdoptWidgets", "inventory": {"namespace": "Team A", "name": ""}, "composite": {"apiVersion": "x"}}`)},
			fatal:  `invalid AdoptWidgets input: composite.apiVersion "x" must be group/version`,
			noAsk:  true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !isOperation(tc.req) {
				t.Fatalf("%s\nisOperation(...) = false for an AdoptWidgets input", tc.reason)
			}
			rsp := adoptWidgets(tc.req, logging.NewNopLogger())
			if got := rsp.GetRequirements() != nil; got == tc.noAsk {
				t.Errorf("%s\nrequirements asked: %t, want %t", tc.reason, got, !tc.noAsk)
			}
			var fatal, normal string
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					fatal = r.GetMessage()
				} else {
					normal = r.GetMessage()
				}
			}
			if !strings.HasPrefix(fatal, tc.fatal) || (tc.fatal == "") != (fatal == "") {
				t.Errorf("%s\nfatal result: want prefix %q, got %q", tc.reason, tc.fatal, fatal)
			}
			if normal != tc.normal {
				t.Errorf("%s\nnormal result: want %q, got %q", tc.reason, tc.normal, normal)
			}
			var got map[string]string
			for id, r := range rsp.GetDesired().GetResources() {
				if got == nil {
					got = map[string]string{}
				}
				obj := r.GetResource().AsMap()
				if obj["kind"] != "XWidget" || obj["apiVersion"] != "platform.widgetco.io/v1alpha1" {
					t.Errorf("%s\n%s: wrong kind %v %v", tc.reason, id, obj["apiVersion"], obj["kind"])
				}
				b, _ := structpb.NewStruct(obj["spec"].(map[string]any))
				j, _ := b.MarshalJSON()
				got[id] = compactJSON(t, j)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nwritten XWidgets: -want, +got:\n%s", tc.reason, diff)
			}
			out := rsp.GetOutput().AsMap()
			for k, v := range tc.outputs {
				if diff := cmp.Diff(v, out[k]); diff != "" {
					t.Errorf("%s\noutput %s: -want, +got:\n%s", tc.reason, k, diff)
				}
			}
		})
	}
}
