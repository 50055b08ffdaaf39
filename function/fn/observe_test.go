package fn

import (
	"context"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

var cmpObservation = []cmp.Option{
	cmp.AllowUnexported(observation{}, widgetObservation{}, keyObservation{}),
	cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime"),
	cmpopts.EquateEmpty(),
}

func TestObserveWidget(t *testing.T) {
	cases := map[string]struct {
		reason string
		o      observedResources
		want   widgetObservation
	}{
		"Absent": {
			reason: "A Widget that does not exist should be observed as absent.",
			o:      observedResources{},
			want:   widgetObservation{},
		},
		"Provisioning": {
			reason: "A Widget's name, external name, conditions, observation and region should be read.",
			o:      observedResources{"widget": observed(nsWidget(), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionFalse, Reason: "Creating"},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"},
				atProvider:   commonv1beta1.WidgetObservation{ID: "w-7f3c9a", State: "Provisioning", Size: "medium", Region: "us-east-1", Generation: 1},
				region:       "us-east-1",
			},
		},
		"RegionFromObservation": {
			reason: "A Widget whose spec has no region (an adopted one) should be observed in the region the Widget API reports.",
			o: observedResources{"widget": observed(nsWidget(
				unset("spec.initProvider.region"), set("status.atProvider.region", "eu-west-1"),
			), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionFalse, Reason: "Creating"},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"},
				atProvider:   commonv1beta1.WidgetObservation{ID: "w-7f3c9a", State: "Provisioning", Size: "medium", Region: "eu-west-1", Generation: 1},
				region:       "eu-west-1",
			},
		},
		"RegionFromSpecBeforeObservation": {
			reason: "A Widget the provider is still creating, whose status has no region yet, should be observed in the region its spec.initProvider asks for: the region it is being created in.",
			o: observedResources{"widget": observed(nsWidget(
				unset("status.atProvider"), conditions(xpCondition("Synced", "True", "ReconcileSuccess", "")),
			), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionUnknown},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"},
				region:       "us-east-1",
			},
		},
		"RegionFromV1alpha1Spec": {
			reason: "A Widget observed at v1alpha1 (as Crossplane observes one it composed before the function composed v1beta1) has its region in spec.forProvider; it should be read from there.",
			o: observedResources{"widget": observed(nsWidget(
				set("apiVersion", "widget.m.widgetco.io/v1alpha1"),
				unset("spec.initProvider"), set("spec.forProvider.region", "eu-west-1"),
				unset("status.atProvider"), conditions(xpCondition("Synced", "True", "ReconcileSuccess", "")),
			), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionUnknown},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"},
				region:       "eu-west-1",
			},
		},
		"Drift": {
			reason: "The provider's record of its drift repairs should be read; an unreadable one is no record.",
			o: observedResources{"widget": observed(nsWidget(
				set("status.drift", map[string]any{"count": int64(2), "lastAt": "2026-11-29T17:00:00Z", "lastChange": "size"}),
			), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionFalse, Reason: "Creating"},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"},
				atProvider:   commonv1beta1.WidgetObservation{ID: "w-7f3c9a", State: "Provisioning", Size: "medium", Region: "us-east-1", Generation: 1},
				drift:        &commonv1beta1.DriftRepairs{Count: 2, LastAt: metav1.NewTime(time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)), LastChange: "size"},
				region:       "us-east-1",
			},
		},
		"UnreadableDrift": {
			reason: "A drift record the function cannot read is no record.",
			o:      observedResources{"widget": observed(nsWidget(set("status.drift", "garbage")), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionFalse, Reason: "Creating"},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"},
				atProvider:   commonv1beta1.WidgetObservation{ID: "w-7f3c9a", State: "Provisioning", Size: "medium", Region: "us-east-1", Generation: 1},
				region:       "us-east-1",
			},
		},
		"UnreadableStatus": {
			reason: "A Widget whose status cannot be read should be observed without one, and so not ready.",
			o: observedResources{"widget": observed(nsWidget(
				set("status.atProvider", "garbage"), unset("status.conditions"), set("metadata.deletionTimestamp", "2026-01-01T00:00:00Z"),
			), nil)},
			want: widgetObservation{
				exists:       true,
				name:         "web-8k2mz",
				externalName: "team-a-web-8k2mz",
				deleting:     true,
				ready:        xpv2.Condition{Type: "Ready", Status: corev1.ConditionUnknown},
				synced:       xpv2.Condition{Type: "Synced", Status: corev1.ConditionUnknown},
				region:       "us-east-1",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := observeWidget(context.Background(), tc.o)
			if diff := cmp.Diff(tc.want, got, cmpObservation...); diff != "" {
				t.Errorf("%s\nobserveWidget(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	details := resource.ConnectionDetails{"key": []byte("s3cr3t")}
	o := observedResources{
		"key-0":             observed(nsKey(0), details),
		"key-1":             observed(nsKey(1, conditions(xpCondition("Synced", "False", "ReconcileError", "boom"))), nil),
		"key-3":             observed(nsKey(2), details),
		"connection-secret": observed(map[string]any{"apiVersion": "v1", "kind": "Secret"}, nil),
	}
	want := observation{
		keys: []keyObservation{
			{index: 0, exists: true, name: "web-q2w7d", synced: xpv2.Condition{Type: "Synced", Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"}, details: details},
			{index: 1, exists: true, name: "web-m5n8c", synced: xpv2.Condition{Type: "Synced", Status: corev1.ConditionFalse, Reason: "ReconcileError", Message: "boom"}},
			{index: 2},
		},
		secretExists: true,
	}
	got := observe(context.Background(), widgetObservation{}, o, 3)
	if diff := cmp.Diff(want, got, cmpObservation...); diff != "" {
		t.Errorf("observe(...) should read the keys the XR asks for, by index, ignore others (key-3), and see the Secret: -want, +got:\n%s", diff)
	}
}
