package fn

import (
	"context"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

func TestComposeResources(t *testing.T) {
	pol, err := newPolicy(inputOf(policyInput()))
	if err != nil {
		t.Fatalf("newPolicy(): %v", err)
	}
	x := xwidget{flavour: FlavourNamespaced, kind: "XWidget", name: "web", namespace: "team-a"}
	s := settings{size: "medium", region: "us-east-1", keys: 2, labels: map[string]string{"managed-by": "crossplane", "team": "payments"}, description: "XWidget team-a/web, managed by Crossplane"}
	synced := xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionTrue}
	created := widgetObservation{exists: true, externalName: "team-a-web-8k2mz", synced: synced}
	ready := created
	ready.ready = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue}
	refused := created
	refused.synced = xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionFalse}
	unnamed := created
	unnamed.externalName = ""
	failed := created
	failed.atProvider.State = commonv1beta1.WidgetStateFailed
	deleting := created
	deleting.deleting = true
	keyReady := keyObservation{exists: true, details: resource.ConnectionDetails{"key": []byte("k")}}

	cases := map[string]struct {
		reason string
		obs    observation
		want   map[resource.Name]resource.Ready
	}{
		"NoWidget": {
			reason: "The keys are composed with the Widget, in the XR's first composition: the provider has each WidgetKey wait quietly for its widget's ID.",
			obs:    observation{keys: []keyObservation{{index: 0}, {index: 1}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyFalse, "key-0": resource.ReadyFalse, "key-1": resource.ReadyFalse},
		},
		"WidgetWithoutID": {
			reason: "A key is composed for a Widget the Widget API has not given an ID yet: its WidgetKey resolves the widget once it has one.",
			obs:    observation{widget: unnamed, keys: []keyObservation{{index: 0}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyFalse, "key-0": resource.ReadyFalse},
		},
		"WidgetRefused": {
			reason: "A Widget the provider cannot reconcile (refused by the tenancy rules, say) gets no new keys.",
			obs:    observation{widget: refused, keys: []keyObservation{{index: 0}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyFalse},
		},
		"WidgetFailed": {
			reason: "A widget that failed would refuse new keys: none is composed, and those that exist stay.",
			obs:    observation{widget: failed, keys: []keyObservation{{index: 0, exists: true}, {index: 1}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyFalse, "key-0": resource.ReadyFalse},
		},
		"WidgetProvisioning": {
			reason: "While the widget provisions, its keys are composed, not ready until they publish their connection details.",
			obs:    observation{widget: created, keys: []keyObservation{{index: 0}, {index: 1}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyFalse, "key-0": resource.ReadyFalse, "key-1": resource.ReadyFalse},
		},
		"WidgetReady": {
			reason: "Once the widget is ready every key is composed, ready when its connection details hold the key.",
			obs:    observation{widget: ready, keys: []keyObservation{{index: 0, exists: keyReady.exists, details: keyReady.details}, {index: 1}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyTrue, "key-0": resource.ReadyTrue, "key-1": resource.ReadyFalse},
		},
		"WidgetBeingDeleted": {
			reason: "Keys that exist stay composed while the Widget is deleted (and then created again), so they are not deleted (revoked); keys that do not exist wait for the new Widget.",
			obs:    observation{widget: deleting, keys: []keyObservation{{index: 0, exists: true}, {index: 1}}},
			want:   map[resource.Name]resource.Ready{"widget": resource.ReadyFalse, "key-0": resource.ReadyFalse},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := composeResources(context.Background(), scopeFor(x.flavour, pol), x, s, tc.obs)
			if err != nil {
				t.Fatalf("%s\ncomposeResources(...): %v", tc.reason, err)
			}
			readiness := make(map[resource.Name]resource.Ready, len(got))
			for name, cd := range got {
				readiness[name] = cd.Ready
				if cd.Resource.GetName() != "" || cd.Resource.GetNamespace() != "" {
					t.Errorf("%s\n%s: the function must leave metadata.name and metadata.namespace to Crossplane, got %s/%s", tc.reason, name, cd.Resource.GetNamespace(), cd.Resource.GetName())
				}
				if _, ok := cd.Resource.Object["status"]; ok {
					t.Errorf("%s\n%s: the function must not send a status", tc.reason, name)
				}
			}
			if diff := cmp.Diff(tc.want, readiness); diff != "" {
				t.Errorf("%s\ncomposeResources(...): -want readiness, +got readiness:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestChildName(t *testing.T) {
	long := strings.Repeat("a", 250)
	cases := map[string]struct {
		reason string
		parent string
		suffix string
		want   string
	}{
		"Short": {
			reason: "A name that fits is the parent's name and the suffix.",
			parent: "web",
			suffix: "-key-0",
			want:   "web-key-0",
		},
		"Long": {
			reason: "A name that does not fit is shortened and made unique by a hash of the parent's name.",
			parent: long,
			suffix: "-connection",
			want:   strings.Repeat("a", 233) + "-3f3e35e0" + "-connection",
		},
		"LongEndingInDash": {
			reason: "A shortened name does not end the shortened part with '-' or '.'.",
			parent: strings.Repeat("a", 232) + "-." + strings.Repeat("b", 20),
			suffix: "-connection",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := childName(tc.parent, tc.suffix)
			if tc.want != "" && got != tc.want {
				t.Errorf("%s\nchildName(...): want %q, got %q", tc.reason, tc.want, got)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("%s\nchildName(...) = %q is not a valid object name: %v", tc.reason, got, errs)
			}
			if again := childName(tc.parent, tc.suffix); again != got {
				t.Errorf("%s\nchildName(...) is not deterministic: %q, then %q", tc.reason, got, again)
			}
		})
	}
}
