package main

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
)

func TestIsReady(t *testing.T) {
	ready := xpv2.Condition{Type: "Ready", Status: corev1.ConditionTrue}
	cases := map[string]struct {
		reason string
		got    bool
		want   bool
	}{
		"WidgetReady":         {reason: "A Widget whose Ready condition is True is ready.", got: widgetObservation{exists: true, ready: ready}.isReady(), want: true},
		"WidgetNotReady":      {reason: "A Widget whose Ready condition is not True is not ready.", got: widgetObservation{exists: true}.isReady(), want: false},
		"WidgetDeleting":      {reason: "A Widget being deleted is not ready, whatever it says.", got: widgetObservation{exists: true, deleting: true, ready: ready}.isReady(), want: false},
		"WidgetAbsent":        {reason: "A Widget that does not exist is not ready.", got: widgetObservation{ready: ready}.isReady(), want: false},
		"KeyWithDetails":      {reason: "A key whose connection details hold the key is ready.", got: keyObservation{exists: true, details: resource.ConnectionDetails{"key": []byte("k")}}.isReady(), want: true},
		"KeyWithoutKey":       {reason: "A key whose connection details lack the key is not ready.", got: keyObservation{exists: true, details: resource.ConnectionDetails{"keyName": []byte("n")}}.isReady(), want: false},
		"KeyDeleting":         {reason: "A key being deleted is not ready.", got: keyObservation{exists: true, deleting: true, details: resource.ConnectionDetails{"key": []byte("k")}}.isReady(), want: false},
		"NoKeysAreAllReady":   {reason: "An XR without keys has all its keys ready.", got: observation{}.keysReady(), want: true},
		"SomeKeysAreNotReady": {reason: "An XR with a key that is not ready does not have all its keys ready.", got: observation{keys: []keyObservation{{exists: true}}}.keysReady(), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%s\nwant %t, got %t", tc.reason, tc.want, tc.got)
			}
		})
	}
}
