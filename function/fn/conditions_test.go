package fn

import (
	"context"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

func TestWidgetCondition(t *testing.T) {
	ready := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: "Available"}
	notReady := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Creating"}
	synced := xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionTrue, Reason: "ReconcileSuccess"}
	unsynced := xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionFalse, Reason: "ReconcileError", Message: "update failed: cannot update widget: rate limited"}
	w := func(state commonv1beta1.WidgetState, r, s xpv2.Condition) widgetObservation {
		return widgetObservation{
			exists: true, name: "web-8k2mz", externalName: "team-a-web-8k2mz", ready: r, synced: s,
			atProvider: commonv1beta1.WidgetObservation{State: state, Endpoint: nsEndpoint, Size: "large"},
		}
	}
	cases := map[string]struct {
		reason string
		w      widgetObservation
		want   condition
	}{
		"Absent": {
			reason: "A Widget that does not exist yet is being created.",
			w:      widgetObservation{},
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Creating", Message: "Creating the widget."},
		},
		"NoStatusYet": {
			reason: "A Widget the provider has not reported on yet is still being created: the message does not change, so the XR is not written again.",
			w:      widgetObservation{exists: true, name: "web-8k2mz"},
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Creating", Message: "Creating the widget."},
		},
		"Ready": {
			reason: "A ready Widget is Available, at its endpoint.",
			w:      w("Ready", ready, synced),
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionTrue, Reason: "Available", Message: "Widget web-8k2mz is ready at " + nsEndpoint + "."},
		},
		"ReadyButUnsynced": {
			reason: "A ready Widget whose latest changes the provider cannot apply stays ready, but says why the changes are not applied.",
			w:      w("Ready", ready, unsynced),
			want: condition{Type: "WidgetReady", Status: corev1.ConditionTrue, Reason: "ReconcileError",
				Message: "Widget web-8k2mz is ready at " + nsEndpoint + ", but the provider cannot apply the latest changes: update failed: cannot update widget: rate limited"},
		},
		"Unsynced": {
			reason: "A Widget the provider cannot reconcile carries the provider's message.",
			w:      w("", xpv2.Condition{}, unsynced),
			want: condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "ReconcileError",
				Message: "The provider cannot reconcile Widget web-8k2mz: update failed: cannot update widget: rate limited"},
		},
		"UnsyncedWithoutMessage": {
			reason: "A provider error without a message is described by its condition.",
			w:      w("", xpv2.Condition{}, xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionFalse, Reason: "ReconcileError"}),
			want: condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "ReconcileError",
				Message: "The provider cannot reconcile Widget web-8k2mz: its Synced condition is False with reason ReconcileError and no message"},
		},
		"FailedWithConditionMessage": {
			reason: "A failed Widget without a message in its observation carries its Ready condition's message.",
			w:      w("Failed", xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Unavailable", Message: "out of capacity."}, synced),
			want: condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Failed",
				Message: "Widget web-8k2mz failed: out of capacity. Delete and recreate the XWidget to try again; ask the platform team if it fails again."},
		},
		"Provisioning": {
			reason: "A provisioning Widget is being provisioned.",
			w:      w("Provisioning", notReady, synced),
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Provisioning", Message: "Widget web-8k2mz is being provisioned."},
		},
		"Resizing": {
			reason: "A resizing Widget is being resized to its new size.",
			w:      w("Resizing", notReady, synced),
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Resizing", Message: "Widget web-8k2mz is being resized to large."},
		},
		"DeletingInAPI": {
			reason: "A widget the Widget API is deleting is reported by its name there.",
			w:      w("Deleting", notReady, synced),
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Deleting", Message: "The Widget API is deleting widget team-a-web-8k2mz."},
		},
		"DeletingResource": {
			reason: "A Widget being deleted is reported as such, whatever it says.",
			w:      widgetObservation{exists: true, deleting: true, name: "web-8k2mz", ready: ready},
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Deleting", Message: "Widget web-8k2mz is being deleted; Crossplane creates it again once it is gone."},
		},
		"Unavailable": {
			reason: "A Widget that is not ready for another reason carries its Ready condition's message.",
			w:      w("", xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Unavailable", Message: "endpoint not reachable"}, synced),
			want:   condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Unavailable", Message: "Widget web-8k2mz is not ready: endpoint not reachable"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, widgetCondition(tc.w)); diff != "" {
				t.Errorf("%s\nwidgetCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKeysCondition(t *testing.T) {
	readyWidget := widgetObservation{
		exists: true, externalName: "team-a-web-8k2mz",
		ready:  xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue},
		synced: xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionTrue},
	}
	unnamedWidget := widgetObservation{exists: true, name: "web-8k2mz"}
	refusedWidget := widgetObservation{
		exists: true, name: "web-8k2mz",
		synced: xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionFalse, Reason: "ReconcileError", Message: "observe failed: 401 unauthorized"},
	}
	failedWidget := readyWidget
	failedWidget.ready = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse}
	failedWidget.atProvider.State = commonv1beta1.WidgetStateFailed
	details := resource.ConnectionDetails{"key": []byte("k")}
	cases := map[string]struct {
		reason string
		obs    observation
		want   condition
	}{
		"NoKeys": {
			reason: "An XR without keys has its keys ready.",
			obs:    observation{widget: readyWidget},
			want:   condition{Type: "KeysReady", Status: corev1.ConditionTrue, Reason: "Available", Message: "No access keys requested."},
		},
		"OneReady": {
			reason: "One ready key is the access key.",
			obs:    observation{keys: []keyObservation{{exists: true, details: details}}},
			want:   condition{Type: "KeysReady", Status: corev1.ConditionTrue, Reason: "Available", Message: "The access key is ready."},
		},
		"WaitingForWidget": {
			reason: "Keys composed with their Widget wait for it to be created.",
			obs:    observation{keys: []keyObservation{{index: 0}, {index: 1}}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "WaitingForWidget",
				Message: "0 of 2 access keys ready; waiting for the widget to be created."},
		},
		"WaitingForWidgetID": {
			reason: "The message does not change when the WidgetKeys and the Widget appear, until the widget has its ID: each new message is one more write of the XR's status.",
			obs:    observation{widget: unnamedWidget, keys: []keyObservation{{index: 0, exists: true, name: "web-q2w7d"}, {index: 1, exists: true, name: "web-m5n8c"}}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "WaitingForWidget",
				Message: "0 of 2 access keys ready; waiting for the widget to be created."},
		},
		"WaitingForWidgetNotKeyError": {
			reason: "A WidgetKey that has waited a minute for its widget's ID reports an unresolved reference; what it waits for is the widget, which WidgetReady explains.",
			obs: observation{widget: unnamedWidget, keys: []keyObservation{
				{index: 0, exists: true, name: "web-q2w7d", synced: xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionFalse, Reason: "ReconcileError", Message: "cannot resolve references: referenced field was empty"}},
			}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "WaitingForWidget",
				Message: "0 of 1 access key ready; waiting for the widget to be created."},
		},
		"WaitingForRefusedWidget": {
			reason: "Keys of a Widget the provider cannot reconcile wait for it, and point to WidgetReady for why.",
			obs:    observation{widget: refusedWidget, keys: []keyObservation{{index: 0, exists: true, name: "web-q2w7d"}}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "WaitingForWidget",
				Message: "0 of 1 access key ready; access keys are created once the provider can reconcile the widget (WidgetReady says why it cannot)."},
		},
		"WidgetFailed": {
			reason: "Keys composed with a widget that then failed are never created, whether their WidgetKeys exist or not.",
			obs:    observation{widget: failedWidget, keys: []keyObservation{{index: 0, exists: true, name: "web-q2w7d"}, {index: 1}}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "WaitingForWidget",
				Message: "0 of 2 access keys ready; no access key is created for a widget that failed."},
		},
		"Creating": {
			reason: "With the widget created, a key that does not exist is being created.",
			obs:    observation{widget: readyWidget, keys: []keyObservation{{index: 0, exists: true, details: details}, {index: 1}}},
			want:   condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "Creating", Message: "1 of 2 access keys ready; creating access key 1."},
		},
		"Publishing": {
			reason: "A key without connection details is still being created: the message does not change when its WidgetKey appears.",
			obs:    observation{widget: readyWidget, keys: []keyObservation{{index: 0, exists: true, name: "web-q2w7d"}}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "Creating",
				Message: "0 of 1 access key ready; creating access key 0."},
		},
		"Deleting": {
			reason: "A key being deleted is reported as such.",
			obs:    observation{widget: readyWidget, keys: []keyObservation{{index: 0, exists: true, deleting: true, name: "web-q2w7d"}}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "Deleting",
				Message: "0 of 1 access key ready; access key 0 (WidgetKey web-q2w7d) is being deleted, and Crossplane creates it again once it is gone."},
		},
		"ReconcileError": {
			reason: "A key the provider cannot reconcile carries the provider's message, before any other key's progress.",
			obs: observation{widget: readyWidget, keys: []keyObservation{
				{index: 0},
				{index: 1, exists: true, name: "web-m5n8c", synced: xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionFalse, Reason: "ReconcileError", Message: "cannot resolve references: no Widget matches the selector"}},
			}},
			want: condition{Type: "KeysReady", Status: corev1.ConditionFalse, Reason: "ReconcileError",
				Message: "0 of 2 access keys ready; the provider cannot reconcile access key 1 (WidgetKey web-m5n8c): cannot resolve references: no Widget matches the selector"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, keysCondition(tc.obs)); diff != "" {
				t.Errorf("%s\nkeysCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSetConditions(t *testing.T) {
	ready := condition{Type: "WidgetReady", Status: corev1.ConditionTrue, Reason: "Available", Message: "Widget w is ready."}
	failed := condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Failed", Message: "Widget w failed: boom."}
	creating := condition{Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Creating", Message: "Creating the widget."}
	readyUnsynced := condition{Type: "WidgetReady", Status: corev1.ConditionTrue, Reason: "ReconcileError", Message: "Widget w is ready, but..."}

	type want struct {
		conditions []*fnv1.Condition
		results    []*fnv1.Result
		changed    []condition
	}
	cases := map[string]struct {
		reason   string
		existing map[string]condition
		c        condition
		want     want
	}{
		"New": {
			reason: "A condition the XR does not have yet is a transition: normal when it is True.",
			c:      ready,
			want: want{
				conditions: []*fnv1.Condition{wantCondition("WidgetReady", condTrue, "Available", "Widget w is ready.")},
				results:    []*fnv1.Result{result(sevNormal, "Available", "Widget w is ready.")},
				changed:    []condition{ready},
			},
		},
		"Unchanged": {
			reason:   "A condition whose status and reason the XR already has is no transition, even if its message changed.",
			existing: map[string]condition{"WidgetReady": {Type: "WidgetReady", Status: corev1.ConditionFalse, Reason: "Creating", Message: "older words"}},
			c:        creating,
			want: want{
				conditions: []*fnv1.Condition{wantCondition("WidgetReady", condFalse, "Creating", "Creating the widget.")},
				changed:    []condition{},
			},
		},
		"ToProblem": {
			reason:   "A transition to a reason that needs someone to act is a warning.",
			existing: map[string]condition{"WidgetReady": ready},
			c:        failed,
			want: want{
				conditions: []*fnv1.Condition{wantCondition("WidgetReady", condFalse, "Failed", "Widget w failed: boom.")},
				results:    []*fnv1.Result{result(sevWarning, "Failed", "Widget w failed: boom.")},
				changed:    []condition{failed},
			},
		},
		"ToProgress": {
			reason:   "A transition to a reason of progress is normal.",
			existing: map[string]condition{"WidgetReady": failed},
			c:        creating,
			want: want{
				conditions: []*fnv1.Condition{wantCondition("WidgetReady", condFalse, "Creating", "Creating the widget.")},
				results:    []*fnv1.Result{result(sevNormal, "Creating", "Creating the widget.")},
				changed:    []condition{creating},
			},
		},
		"ReadyWithProblem": {
			reason:   "A True condition that reports a provider error is a warning.",
			existing: map[string]condition{"WidgetReady": ready},
			c:        readyUnsynced,
			want: want{
				conditions: []*fnv1.Condition{wantCondition("WidgetReady", condTrue, "ReconcileError", "Widget w is ready, but...")},
				results:    []*fnv1.Result{result(sevWarning, "ReconcileError", "Widget w is ready, but...")},
				changed:    []condition{readyUnsynced},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp := &fnv1.RunFunctionResponse{}
			changed := setConditions(rsp, xwidget{conditions: tc.existing}, tc.c)
			if diff := cmp.Diff(tc.want.conditions, rsp.GetConditions(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nconditions: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.results, rsp.GetResults(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nresults: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.changed, changed); diff != "" {
				t.Errorf("%s\nchanged: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObservedConditions(t *testing.T) {
	oxr, err := readXWidget(context.Background(), compositeOf(nsXR(conditions(
		xpCondition("Ready", "False", "Creating", ""),
		xpCondition("WidgetReady", "True", "Available", "ready"),
	))))
	if err != nil {
		t.Fatalf("readXWidget(): %v", err)
	}
	want := map[string]condition{
		"Ready":       {Type: "Ready", Status: corev1.ConditionFalse, Reason: "Creating"},
		"WidgetReady": {Type: "WidgetReady", Status: corev1.ConditionTrue, Reason: "Available", Message: "ready"},
	}
	if diff := cmp.Diff(want, oxr.conditions); diff != "" {
		t.Errorf("the XR's conditions should be read by type: -want, +got:\n%s", diff)
	}
}

func TestRejectedCondition(t *testing.T) {
	x := xwidget{kind: "XWidget", name: "web", namespace: "team-a"}
	cases := map[string]struct {
		reason string
		err    error
		want   condition
	}{
		"Rejection": {
			reason: "A rejection's reason and message become the condition's.",
			err:    unsupported("not this one"),
			want:   condition{Type: "PolicyCompliant", Status: corev1.ConditionFalse, Reason: "UnsupportedComposite", Message: "not this one"},
		},
		"OtherError": {
			reason: "Any other error is an invalid request.",
			err:    errBoom,
			want:   condition{Type: "PolicyCompliant", Status: corev1.ConditionFalse, Reason: "InvalidRequest", Message: "cannot compose XWidget team-a/web: boom"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, rejectedCondition(x, tc.err)); diff != "" {
				t.Errorf("%s\nrejectedCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
