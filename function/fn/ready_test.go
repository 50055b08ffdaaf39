package fn

import (
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
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

func TestTTLFor(t *testing.T) {
	pol := policy{convergingTTL: time.Minute, readyTTL: 10 * time.Minute}
	short := policy{convergingTTL: 2 * time.Second, readyTTL: 10 * time.Minute}
	cases := map[string]struct {
		reason   string
		pol      policy
		ready    bool
		creating bool
		want     time.Duration
	}{
		"Ready":             {reason: "A ready XR gets the ready TTL.", pol: pol, ready: true, want: 10 * time.Minute},
		"Converging":        {reason: "A converging XR whose resources all exist gets the converging TTL.", pol: pol, want: time.Minute},
		"Creating":          {reason: "A converging XR that composes a resource Crossplane has not observed gets 5 s.", pol: pol, creating: true, want: 5 * time.Second},
		"CreatingShortPoll": {reason: "A converging TTL shorter than 5 s is kept while creating.", pol: short, creating: true, want: 2 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ttlFor(tc.pol, tc.ready, tc.creating).AsDuration(); got != tc.want {
				t.Errorf("%s\nttlFor(...): want %s, got %s", tc.reason, tc.want, got)
			}
		})
	}
}

func TestCreates(t *testing.T) {
	observed := observedResources{"widget": &fnv1.Resource{}}
	cases := map[string]struct {
		reason   string
		composed []resource.Name
		want     bool
	}{
		"AllObserved": {reason: "Composing only observed resources creates nothing.", composed: []resource.Name{"widget"}, want: false},
		"NewKey":      {reason: "Composing a key that was not observed creates it.", composed: []resource.Name{"widget", "key-0"}, want: true},
		"Nothing":     {reason: "Composing nothing creates nothing.", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &outcome{composed: map[resource.Name]*resource.DesiredComposed{}}
			for _, n := range tc.composed {
				o.composed[n] = &resource.DesiredComposed{}
			}
			if got := o.creates(observed); got != tc.want {
				t.Errorf("%s\ncreates(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}
