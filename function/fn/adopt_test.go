package fn

import (
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// adopting makes an XR adopt the widget legacy-web in mode.
func adopting(mode string) mod {
	return set("spec.adopt", map[string]any{"name": "legacy-web", "mode": mode})
}

// review gives an observed Widget the provider's import review.
func review(status, reason, msg string) mod {
	return func(o map[string]any) {
		l, _ := o["status"].(map[string]any)["conditions"].([]any)
		set("status.conditions", append(l, xpCondition("UpToDate", status, reason, msg)))(o)
	}
}

// adoptedWidget is the observed namespaced Widget of an adopting XR: it
// names legacy-web and has read it.
func adoptedWidget(mods ...mod) map[string]any {
	base := []mod{
		set("metadata.annotations", map[string]any{"crossplane.io/composition-resource-name": "widget", "crossplane.io/external-name": "legacy-web"}),
		widgetReady("https://legacy-web.widgets.example.com"),
		set("status.atProvider.labels", map[string]any{"app": "legacy"}),
	}
	return nsWidget(append(base, mods...)...)
}

const wouldChange = `Switching to full management would change the widget: size: want "medium", have "small"`

func TestAdoption(t *testing.T) {
	type want struct {
		// fatal, when set, is a substring of the fatal result; nothing is
		// composed then.
		fatal string
		// hides are words the fatal result must not contain.
		hides []string
		// policies of the desired Widget; nil for unset.
		policies any
		// resources are the desired composed resources' names.
		resources []string
		adopted   string // reason of the Adopted condition
		keys      string // reason of the KeysReady condition
		status    map[string]any
	}
	cases := map[string]struct {
		reason string
		req    testRequest
		want   want
	}{
		"ReviewNew": {
			reason: "A new adoption observes: an Observe-only Widget naming the widget, no keys.",
			req:    testRequest{xr: nsXR(adopting("Review")), input: policyInput()},
			want: want{policies: []any{"Observe"}, resources: []string{"connection-secret", "widget"}, adopted: reasonReviewing, keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Review"}},
		},
		"Review": {
			reason: "The provider's review reaches the XR's condition and status; still nothing is managed.",
			req: testRequest{xr: nsXR(adopting("Review")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"Observe"}), review("False", "WouldChange", wouldChange)), nil),
			}},
			want: want{policies: []any{"Observe"}, resources: []string{"connection-secret", "widget"}, adopted: "WouldChange", keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Review", "review": wouldChange + "."}},
		},
		"ManageBeforeReview": {
			reason: "Asking for Manage before the provider has reviewed the widget still only observes: a name that does not exist must never be created.",
			req:    testRequest{xr: nsXR(adopting("Manage")), input: policyInput()},
			want: want{policies: []any{"Observe"}, resources: []string{"connection-secret", "widget"}, adopted: reasonReviewing, keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Review"}},
		},
		"Manage": {
			reason: "Manage after a review that found the widget adoptable is an edit: the same Widget gets full management.",
			req: testRequest{xr: nsXR(adopting("Manage")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"Observe"}), review("False", "WouldChange", wouldChange)), nil),
			}},
			want: want{policies: []any{"*"}, resources: []string{"connection-secret", "widget"}, adopted: reasonTakingOver, keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Manage", "review": wouldChange + "."}},
		},
		"ManageKeep": {
			reason: "Manage with onDelete KeepWidget takes over without Delete.",
			req: testRequest{xr: nsXR(adopting("Manage"), set("spec.onDelete", "KeepWidget")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"Observe"}), review("False", "WouldChange", wouldChange)), nil),
			}},
			want: want{policies: keep, resources: []string{"connection-secret", "widget"}, adopted: reasonTakingOver, keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Manage", "review": wouldChange + "."}},
		},
		"Managed": {
			reason: "Once the widget carries the marker and the review says Managed, the XR's own keys are composed.",
			req: testRequest{xr: nsXR(adopting("Manage")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"*"}), set("status.atProvider.labels", map[string]any{"widgetco.io/owner": "n_team-a.web-8k2mz"}),
					review("True", "Managed", "Fully managed: the provider applies the spec and repairs drift.")), nil),
			}},
			want: want{policies: []any{"*"}, resources: []string{"connection-secret", "key-0", "key-1", "widget"}, adopted: reasonManaged, keys: reasonCreating,
				status: map[string]any{"name": "legacy-web", "mode": "Manage"}},
		},
		"BackToReview": {
			reason: "Switching a managed adoption back to Review observes again, and keeps the keys that exist (removing them would revoke them).",
			req: testRequest{xr: nsXR(adopting("Review")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"*"}), set("status.atProvider.labels", map[string]any{"widgetco.io/owner": "n_team-a.web-8k2mz"}),
					review("True", "Managed", "Fully managed: the provider applies the spec and repairs drift.")), nil),
				"key-0": observed(nsKey(0), nil),
			}},
			want: want{policies: []any{"Observe"}, resources: []string{"connection-secret", "key-0", "key-1", "widget"}, adopted: reasonManaged, keys: reasonCreating,
				status: map[string]any{"name": "legacy-web", "mode": "Review"}},
		},
		"SizeUnsetAllowed": {
			reason: "An adoption that leaves spec.size unset keeps the widget's size, which the policy allows: no error.",
			req: testRequest{xr: nsXR(adopting("Review"), unset("spec.size")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"Observe"}), set("status.atProvider.size", "small"), review("False", "NoDifference", "Nothing would change.")), nil),
			}},
			want: want{policies: []any{"Observe"}, resources: []string{"connection-secret", "widget"}, adopted: "NoDifference", keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Review", "review": "Nothing would change."}},
		},
		"SizeUnsetNotAllowed": {
			reason: "An adoption that leaves spec.size unset is held to the policy's sizes by the widget's observed size: a field error on spec.size.",
			req: testRequest{xr: nsXR(adopting("Manage"), unset("spec.size")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"Observe"}), set("status.atProvider.size", "large"), review("False", "NoDifference", "Nothing would change.")), nil),
			}},
			want: want{fatal: `spec.size: Required value: widget legacy-web is large, a size the platform does not allow (allowed: small, medium): set spec.size`},
		},
		"SizeSetResizes": {
			reason: "Setting spec.size to an allowed size adopts a widget of a size the policy does not allow: the takeover resizes it.",
			req: testRequest{xr: nsXR(adopting("Review")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(set("spec.managementPolicies", []any{"Observe"}), set("status.atProvider.size", "large"), review("False", "WouldChange", wouldChange)), nil),
			}},
			want: want{policies: []any{"Observe"}, resources: []string{"connection-secret", "widget"}, adopted: "WouldChange", keys: reasonWaitingForAdoption,
				status: map[string]any{"name": "legacy-web", "mode": "Review", "review": wouldChange + "."}},
		},
		"NotFound": {
			reason: "A name no widget has is a field error on spec.adopt.name; nothing is composed.",
			req: testRequest{xr: nsXR(adopting("Manage")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(review("False", "NotFound", "Widget legacy-web does not exist in the Widget API.")), nil),
			}},
			want: want{fatal: `spec.adopt.name: Invalid value: "legacy-web": no widget of this name exists`},
		},
		"OutOfReach": {
			reason: "Another namespace's widget is refused on spec.adopt.name, naming neither the owner nor its namespace.",
			req: testRequest{xr: nsXR(adopting("Review")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(review("False", "OutOfReach", "Widget legacy-web is managed by a resource outside namespace team-a.")), nil),
			}},
			want: want{fatal: `spec.adopt.name: Invalid value: "legacy-web": the widget is managed by another resource`, hides: []string{"team-b", "outside namespace"}},
		},
		"Reserved": {
			reason: "A widget another namespace released is refused on spec.adopt.name, naming neither that namespace nor the releaser, and says who can lift the reservation.",
			req: testRequest{xr: nsXR(adopting("Review")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(review("False", "Reserved", "Widget legacy-web was released by a resource outside namespace team-a and stays reserved for its namespace.")), nil),
			}},
			want: want{fatal: `spec.adopt.name: Invalid value: "legacy-web": the widget was released by a resource of another namespace and stays reserved for that namespace, so it cannot be adopted here: if it was handed over to you, ask your platform team to remove the label widgetco.io/released-by`, hides: []string{"team-b", "outside namespace"}},
		},
		"AdoptedByAnotherXWidget": {
			reason: "A widget another XWidget adopted is refused.",
			req: testRequest{xr: nsXR(adopting("Manage")), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(adoptedWidget(review("False", "ManagedByAnother", "Switching to full management would be refused: widget legacy-web is already managed by namespaced managed resource team-a/other-x9 (label widgetco.io/owner=n_team-a.other-x9).")), nil),
			}},
			want: want{fatal: "the widget is managed by another resource", hides: []string{"other-x9"}},
		},
		"LegacyOwned": {
			reason: "A claim's cluster-scoped Widget sees who owns the widget; the claim is told only that another resource manages it.",
			req: testRequest{xr: legacyXR(set("spec.adopt", map[string]any{"name": "legacy-web"})), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(legacyWidget(review("False", "ManagedByAnother", "Switching to full management would be refused: widget legacy-web is already managed by namespaced managed resource team-a/web-8k2mz (label widgetco.io/owner=n_team-a.web-8k2mz).")), nil),
			}},
			want: want{fatal: "WidgetClaim team-b/web cannot adopt widget legacy-web", hides: []string{"team-a", "web-8k2mz"}},
		},
		"InvalidFields": {
			reason: "A name that cannot be a widget's and an unknown mode are field errors.",
			req:    testRequest{xr: nsXR(set("spec.adopt", map[string]any{"name": "Legacy_Web", "mode": "Steal"})), input: policyInput()},
			want:   want{fatal: `spec.adopt.name: Invalid value: "Legacy_Web": must be the name of a widget`},
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
			fatal := fatalMessage(rsp)
			if tc.want.fatal != "" || fatal != "" {
				if !strings.Contains(fatal, tc.want.fatal) || fatal == "" {
					t.Fatalf("%s\nfatal result: want it to contain %q, got %q", tc.reason, tc.want.fatal, fatal)
				}
				for _, h := range tc.want.hides {
					if strings.Contains(fatal, h) {
						t.Errorf("%s\nfatal result %q reveals %q", tc.reason, fatal, h)
					}
				}
				if n := len(rsp.GetDesired().GetResources()); n != 0 {
					t.Errorf("%s\na refused adoption composed %d resources", tc.reason, n)
				}
				return
			}
			var names []string
			for n := range rsp.GetDesired().GetResources() {
				names = append(names, n)
			}
			if diff := cmp.Diff(tc.want.resources, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("%s\ndesired resources: -want, +got:\n%s", tc.reason, diff)
			}
			w := rsp.GetDesired().GetResources()["widget"].GetResource().AsMap()
			spec, _ := w["spec"].(map[string]any)
			if diff := cmp.Diff(tc.want.policies, spec["managementPolicies"]); diff != "" {
				t.Errorf("%s\nWidget policies: -want, +got:\n%s", tc.reason, diff)
			}
			if got := w["metadata"].(map[string]any)["annotations"].(map[string]any)["crossplane.io/external-name"]; got != "legacy-web" {
				t.Errorf("%s\nWidget external name: want legacy-web, got %v", tc.reason, got)
			}
			fp, _ := spec["forProvider"].(map[string]any)
			if _, ok := spec["initProvider"]; ok || fp["description"] != nil {
				t.Errorf("%s\nan adopted widget got creation-only or defaulted fields: %v", tc.reason, spec)
			}
			got := map[string]string{}
			for _, c := range rsp.GetConditions() {
				got[c.GetType()] = c.GetReason()
			}
			if got[typeAdopted] != tc.want.adopted || got[typeKeysReady] != tc.want.keys {
				t.Errorf("%s\nAdopted, KeysReady reasons: want %s, %s; got %s, %s", tc.reason, tc.want.adopted, tc.want.keys, got[typeAdopted], got[typeKeysReady])
			}
			st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
			if diff := cmp.Diff(tc.want.status, st["adoption"]); diff != "" {
				t.Errorf("%s\nstatus.adoption: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
