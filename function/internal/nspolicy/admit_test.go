package nspolicy

import (
	"errors"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
)

// The package's behaviour through RunFunction, with every namespace policy
// and quota, is tested in package fn (nspolicy_test.go, quota_test.go,
// admission_test.go): these cases pin Admit's own contract.
func TestAdmit(t *testing.T) {
	xrA := XR{Owner: "XWidget team-a/web", Kind: "XWidget", Namespace: "team-a"}
	comp := Composition{AllowedSizes: []string{"small", "medium"}, MaxKeys: 3, DefaultSize: "small", DefaultKeys: 1}
	spec := Spec{Size: "medium", Region: "us-east-1", Keys: 2}
	policies := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: resource.MustStructJSON(`{
		"apiVersion": "apiextensions.crossplane.io/v1beta1",
		"kind": "EnvironmentConfig",
		"metadata": {"name": "team-a", "labels": {"fn.widgetco.io/widget-policy": "true"}},
		"data": {"widgetPolicy": {"namespaceSelector": {}, "rules": {"allowedSizes": ["small"]}}}
	}`)}}}
	namespace := &fnv1.Resources{Items: []*fnv1.Resource{{Resource: resource.MustStructJSON(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}`)}}}

	type want struct {
		reqs      []string
		condition Condition
		err       error
	}
	cases := map[string]struct {
		reason   string
		xr       XR
		required map[string]*fnv1.Resources
		want     want
	}{
		"NoNamespace": {
			reason: "A legacy XR without a claim has no namespace: only the Composition's policy applies, and nothing is required.",
			xr:     XR{Owner: "XWidget web-x7k2p", Kind: "XWidget", Legacy: true},
			want: want{condition: Condition{Type: "PolicyCompliant", Status: corev1.ConditionTrue, Reason: "Compliant",
				Message: "XWidget web-x7k2p complies with the platform's widget policy: the Composition's WidgetPolicy."}},
		},
		"PoliciesNotFetchedYet": {
			reason: "Until Crossplane sends the namespace policies, the XR is decided on the Composition's policy, and the policies are required.",
			xr:     xrA,
			want: want{reqs: []string{"widget-policy-environmentconfigs"}, condition: Condition{Type: "PolicyCompliant", Status: corev1.ConditionTrue, Reason: "Compliant",
				Message: "XWidget team-a/web complies with the platform's widget policy: the Composition's WidgetPolicy; no namespace policy applies to team-a."}},
		},
		"NarrowedByPolicy": {
			reason: "A namespace policy that narrows the sizes rejects a new XR that asks for another, as a policy violation.",
			xr:     xrA,
			required: map[string]*fnv1.Resources{
				"widget-policy-environmentconfigs": policies,
				"widget-policy-namespace":          namespace,
			},
			want: want{reqs: []string{"widget-policy-environmentconfigs", "widget-policy-namespace"}, err: &Rejection{Reason: "PolicyViolation"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := &fnv1.RunFunctionRequest{
				Observed:          &fnv1.State{Composite: &fnv1.Resource{Resource: resource.MustStructJSON(`{"apiVersion": "platform.widgetco.io/v1alpha1", "kind": "XWidget", "metadata": {"name": "web"}}`)}},
				RequiredResources: tc.required,
			}
			v, err := Admit(req, Input{XR: tc.xr, Composition: comp, Want: spec, Composed: Composed{Nothing: true}}, time.Unix(0, 0))
			var got want
			for k := range v.Requirements.GetResources() {
				got.reqs = append(got.reqs, k)
			}
			if err == nil {
				got.condition = v.Condition()
			}
			// The reason is the contract; the messages are pinned by
			// package fn's tests.
			got.err = err
			if r := (&Rejection{}); errors.As(err, &r) {
				got.err = &Rejection{Reason: r.Reason}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nAdmit(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
