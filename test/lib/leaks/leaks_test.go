package leaks

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Canaries of the leak scanner's tests. Their fingerprints are in the
// expectations, computed by hand:
//
//	printf %s wks_CANARYkeyCANARYkeyCANARYkeyCANARYkeyCANARYk | sha256sum
const (
	// testKey's fingerprint is sha256:9f4685aca476, and its base64
	// d2tzX0NBTkFSWWtleUNBTkFSWWtleUNBTkFSWWtleUNBTkFSWWtleUNBTkFSWWs=.
	testKey = "wks_CANARYkeyCANARYkeyCANARYkeyCANARYkeyCANARYk"
	// testToken's fingerprint is sha256:2b94696d3c76, and its base64
	// ZTJlLWNhbmFyeS10b2tlbi0wMTIzNDU2Nzg5YWJjZGVm.
	testToken = "e2e-canary-token-0123456789abcdef"
	// unknownKey is shaped like a key but no canary's value; its
	// fingerprint is sha256:52a60d2702f9.
	unknownKey = "wks_OTHERotherOTHERotherOTHERotherOTHERotherOTH"
)

func testScanner() *Scanner {
	return NewScanner(
		Canary{Kind: "key secret", Value: testKey},
		Canary{Kind: "token", Value: testToken},
		Canary{Kind: "key-shaped string", Pattern: regexp.MustCompile(`wks_[A-Za-z0-9_-]{43}`)},
	)
}

func TestScannerText(t *testing.T) {
	cases := map[string]struct {
		reason string
		text   string
		want   []Leak
	}{
		"Clean": {
			reason: "A log without canaries has no leaks, even with words that look a little like one.",
			text:   "reconciling WidgetKey team-a/ci\nkey wks_short created\ntoken: <redacted>\n",
		},
		"KeyInLogLine": {
			reason: "A key secret logged verbatim is reported with the file and line, under its fingerprint (and, being key-shaped, by the pattern too).",
			text:   "starting\nlevel=DEBUG msg=\"created key\" secret=" + testKey + "\ndone\n",
			want: []Leak{
				{Canary: "key secret sha256:9f4685aca476", Where: "log provider-widget.log:2", Form: "verbatim"},
				{Canary: "key-shaped string sha256:9f4685aca476", Where: "log provider-widget.log:2", Form: "verbatim"},
			},
		},
		"Base64InConnectionDetails": {
			reason: "Connection details logged as JSON hold []byte values base64-encoded: still a leak.",
			text:   `{"msg":"publishing","details":{"key":"d2tzX0NBTkFSWWtleUNBTkFSWWtleUNBTkFSWWtleUNBTkFSWWtleUNBTkFSWWs="}}` + "\n",
			want:   []Leak{{Canary: "key secret sha256:9f4685aca476", Where: "log provider-widget.log:1", Form: "base64"}},
		},
		"TokenOnTwoLinesTwiceEach": {
			reason: "Each line holding a canary is one leak, however often the canary appears on it.",
			text:   "Authorization: Bearer " + testToken + " " + testToken + "\nok\nretry with " + testToken + "\n",
			want: []Leak{
				{Canary: "token sha256:2b94696d3c76", Where: "log provider-widget.log:1", Form: "verbatim"},
				{Canary: "token sha256:2b94696d3c76", Where: "log provider-widget.log:3", Form: "verbatim"},
			},
		},
		"UnknownKeyByShape": {
			reason: "A key secret nobody recorded is still found by its shape.",
			text:   "created key " + unknownKey + "\n",
			want:   []Leak{{Canary: "key-shaped string sha256:52a60d2702f9", Where: "log provider-widget.log:1", Form: "verbatim"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := testScanner().Text("log provider-widget.log", []byte(tc.text))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nText(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestScannerObject(t *testing.T) {
	cases := map[string]struct {
		reason string
		where  string
		obj    map[string]any
		want   []Leak
	}{
		"CleanWidget": {
			reason: "A managed resource whose status holds no canary has no leaks.",
			where:  "Widget.widget.m.widgetco.io team-a/web",
			obj: map[string]any{
				"metadata": map[string]any{"name": "web", "namespace": "team-a"},
				"status": map[string]any{
					"atProvider": map[string]any{"id": "w-123", "endpoint": "https://web.widgets.example"},
					"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
				},
			},
		},
		"KeyInConditionMessage": {
			reason: "A key secret in a condition message is reported with the object and the field's path.",
			where:  "WidgetKey.widget.m.widgetco.io team-a/ci",
			obj: map[string]any{
				"metadata": map[string]any{"name": "ci", "namespace": "team-a"},
				"status": map[string]any{"conditions": []any{
					map[string]any{"type": "Ready", "status": "True"},
					map[string]any{"type": "Synced", "status": "False", "message": "cannot publish key " + testKey},
				}},
			},
			want: []Leak{
				{Canary: "key secret sha256:9f4685aca476", Where: "WidgetKey.widget.m.widgetco.io team-a/ci status.conditions[1].message", Form: "verbatim"},
				{Canary: "key-shaped string sha256:9f4685aca476", Where: "WidgetKey.widget.m.widgetco.io team-a/ci status.conditions[1].message", Form: "verbatim"},
			},
		},
		"TokenInEventMessage": {
			reason: "A token in an event is reported with the event and the field.",
			where:  "Event team-a/ci.17a2b",
			obj: map[string]any{
				"metadata":       map[string]any{"name": "ci.17a2b", "namespace": "team-a"},
				"involvedObject": map[string]any{"kind": "WidgetKey", "name": "ci"},
				"reason":         "CannotConnectToProvider",
				"message":        "cannot connect with token " + testToken,
			},
			want: []Leak{{Canary: "token sha256:2b94696d3c76", Where: "Event team-a/ci.17a2b message", Form: "verbatim"}},
		},
		"Base64TokenInAnnotation": {
			reason: "A base64-encoded token in an annotation is reported with the annotation's key in the path.",
			where:  "XWidget.platform.widgetco.io team-a/web",
			obj: map[string]any{
				"metadata": map[string]any{"name": "web", "annotations": map[string]any{"example.org/config": "ZTJlLWNhbmFyeS10b2tlbi0wMTIzNDU2Nzg5YWJjZGVm"}},
			},
			want: []Leak{{Canary: "token sha256:2b94696d3c76", Where: `XWidget.platform.widgetco.io team-a/web metadata.annotations["example.org/config"]`, Form: "base64"}},
		},
		"KeyAsMapKey": {
			reason: "A canary used as a map key is a leak too, and the path names the key by its fingerprint only.",
			where:  "ConfigMap team-a/cache",
			obj: map[string]any{
				"data": map[string]any{unknownKey: "1"},
			},
			want: []Leak{{Canary: "key-shaped string sha256:52a60d2702f9", Where: "ConfigMap team-a/cache data[<sha256:52a60d2702f9>] (the key itself)", Form: "verbatim"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := testScanner().Object(tc.where, tc.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObject(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	if got, want := Fingerprint(testToken), "sha256:2b94696d3c76"; got != want {
		t.Errorf("Fingerprint(testToken) = %q, want %q", got, want)
	}
}
