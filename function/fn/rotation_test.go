package fn

import (
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// rotationBounds returns the examples' rotation policy.
func rotationBounds() map[string]any {
	return map[string]any{"defaultOverlap": "24h", "minPeriod": "168h", "maxPeriod": "2160h", "maxOverlap": "168h"}
}

func TestRotation(t *testing.T) {
	ready := func(i int) map[string][]byte {
		return keyDetails([]string{"team-a-web-q2w7d", "team-a-web-m5n8c"}[i], "s3cr3t", "team-a-web-8k2mz", nsEndpoint)
	}
	obs := map[string]*fnv1.Resource{
		"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil),
		"key-0":  observed(nsKey(0), ready(0)),
		"key-1":  observed(nsKey(1), ready(1)),
	}
	type want struct {
		// rotation of every desired WidgetKey; nil for unset.
		rotation any
		fatal    string
	}
	legacyObs := map[string]*fnv1.Resource{
		"widget": observed(legacyWidget(), nil),
		"key-0":  observed(legacyKey(), keyDetails("web-5t2xq-b4r6s", "s3cr3t", "web-5t2xq-h7kzp", lgEndpoint)),
	}
	cases := map[string]struct {
		reason string
		xr     map[string]any
		policy map[string]any
		// observed defaults to obs, keys to key-0 and key-1.
		observed map[string]*fnv1.Resource
		keys     []string
		want     want
	}{
		"Legacy": {
			reason: "A claim's cluster-scoped WidgetKeys get the same rotation.",
			xr:     legacyXR(set("spec.rotation", map[string]any{"period": "720h"})), policy: rotationBounds(),
			observed: legacyObs, keys: []string{"key-0"},
			want: want{rotation: map[string]any{"period": "720h", "overlap": "24h"}},
		},
		"None": {
			reason: "Without spec.rotation and a default period, keys do not rotate and the WidgetKeys are as before.",
			xr:     nsXR(), policy: rotationBounds(),
			want: want{rotation: nil},
		},
		"NoPolicy": {
			reason: "Without a rotation policy the WidgetKey's own bounds apply and the overlap defaults to 24h.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "2h"})),
			want:   want{fatal: `spec.rotation.overlap: Required value: the platform's default overlap (24h) is not shorter than the period (2h)`},
		},
		"Set": {
			reason: "The XR's period, overlap and request reach every WidgetKey, durations written as people write them.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "720h", "overlap": "36h", "requestedAt": "2026-11-27T10:00:00Z"})), policy: rotationBounds(),
			want: want{rotation: map[string]any{"period": "720h", "overlap": "36h", "requestedAt": "2026-11-27T10:00:00Z"}},
		},
		"DefaultPeriod": {
			reason: "The platform's default period rotates the keys of an XR that says nothing.",
			xr:     nsXR(), policy: build(rotationBounds(), set("defaultPeriod", "720h")),
			want: want{rotation: map[string]any{"period": "720h", "overlap": "24h"}},
		},
		"OnRequestOnly": {
			reason: "A request without a period rotates once, with the default overlap; an offset time is written in UTC.",
			xr:     nsXR(set("spec.rotation", map[string]any{"requestedAt": "2026-11-27T11:00:00+01:00", "revokePreviousAt": "2026-11-27T10:00:00Z"})), policy: rotationBounds(),
			want: want{rotation: map[string]any{"overlap": "24h", "requestedAt": "2026-11-27T10:00:00Z", "revokePreviousAt": "2026-11-27T10:00:00Z"}},
		},
		"PeriodBelowMin": {
			reason: "A period below the policy's minimum is a field error, and nothing is composed.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "24h"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.period: Invalid value: "24h": the platform allows periods from 168h to 2160h`},
		},
		"PeriodAboveMax": {
			reason: "A period above the policy's maximum is a field error.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "2161h"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.period: Invalid value: "2161h": the platform allows periods from 168h to 2160h`},
		},
		"OverlapNotShorter": {
			reason: "An overlap as long as the period is a field error.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "168h", "overlap": "168h"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.overlap: Invalid value: "168h": must be shorter than the period (168h)`},
		},
		"OverlapAboveMax": {
			reason: "An overlap above the policy's maximum is a field error.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "720h", "overlap": "169h"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.overlap: Invalid value: "169h": the platform allows overlaps up to 168h`},
		},
		"OverlapBelowMin": {
			reason: "An overlap below the WidgetKey's minimum is a field error.",
			xr:     nsXR(set("spec.rotation", map[string]any{"overlap": "1m"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.overlap: Invalid value: "1m": must be at least 5m`},
		},
		"NotADuration": {
			reason: "A period that is no Go duration is a field error.",
			xr:     nsXR(set("spec.rotation", map[string]any{"period": "30d"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.period: Invalid value: "30d": must be a positive Go duration`},
		},
		"NotATime": {
			reason: "A requestedAt that is no RFC 3339 time is a field error.",
			xr:     nsXR(set("spec.rotation", map[string]any{"requestedAt": "now"})), policy: rotationBounds(),
			want: want{fatal: `spec.rotation.requestedAt: Invalid value: "now": must be a time such as 2026-11-27T10:00:00Z`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := policyInput()
			if tc.policy != nil {
				in = policyInput(set("rotation", tc.policy))
			}
			f, err := NewFunction()
			if err != nil {
				t.Fatal(err)
			}
			o, keys := obs, []string{"key-0", "key-1"}
			if tc.observed != nil {
				o, keys = tc.observed, tc.keys
			}
			rsp, err := f.RunFunction(t.Context(), testRequest{xr: tc.xr, input: in, observed: o}.build())
			if err != nil {
				t.Fatal(err)
			}
			if rejected(t, tc.reason, rsp, tc.want.fatal) {
				return
			}
			for _, n := range keys {
				r, ok := rsp.GetDesired().GetResources()[n]
				if !ok {
					t.Fatalf("%s\n%s is not composed", tc.reason, n)
				}
				fp, _ := r.GetResource().AsMap()["spec"].(map[string]any)["forProvider"].(map[string]any)
				if diff := cmp.Diff(tc.want.rotation, fp["rotation"]); diff != "" {
					t.Errorf("%s\n%s spec.forProvider.rotation: -want, +got:\n%s", tc.reason, n, diff)
				}
			}
		})
	}
}

func TestValidateRotationPolicy(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Duration{Duration: v}
	}
	p := field.NewPath("rotation")
	cases := map[string]struct {
		reason string
		in     v1beta1.RotationPolicy
		want   []string
	}{
		"Empty": {
			reason: "An empty policy is valid.",
		},
		"Examples": {
			reason: "The examples' policy is valid.",
			in:     v1beta1.RotationPolicy{DefaultOverlap: d("24h"), MinPeriod: d("168h"), MaxPeriod: d("2160h"), MaxOverlap: d("168h")},
		},
		"OutOfWidgetKeyBounds": {
			reason: "No bound can be wider than a WidgetKey allows.",
			in:     v1beta1.RotationPolicy{MinPeriod: d("30m"), DefaultOverlap: d("1m")},
			want:   []string{p.Child("minPeriod").String(), p.Child("defaultOverlap").String()},
		},
		"MinAboveMax": {
			reason: "minPeriod must not be longer than maxPeriod.",
			in:     v1beta1.RotationPolicy{MinPeriod: d("720h"), MaxPeriod: d("168h")},
			want:   []string{p.Child("minPeriod").String()},
		},
		"DefaultPeriodOutOfBounds": {
			reason: "The default period must be one the policy allows.",
			in:     v1beta1.RotationPolicy{DefaultPeriod: d("24h"), MinPeriod: d("168h")},
			want:   []string{p.Child("defaultPeriod").String()},
		},
		"DefaultOverlapNotShorter": {
			reason: "The default overlap must be shorter than every period allowed.",
			in:     v1beta1.RotationPolicy{DefaultOverlap: d("2h"), MinPeriod: d("2h")},
			want:   []string{p.Child("defaultOverlap").String()},
		},
		"BuiltInOverlapAboveMax": {
			reason: "A maxOverlap below the built-in default overlap needs a default overlap.",
			in:     v1beta1.RotationPolicy{MaxOverlap: d("1h")},
			want:   []string{p.Child("defaultOverlap").String()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range validateRotationPolicy(tc.in, p) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ninvalid fields: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRotationStatus(t *testing.T) {
	ready := func(i int) map[string][]byte {
		return keyDetails([]string{"team-a-web-q2w7d", "team-a-web-m5n8c"}[i], "s3cr3t", "team-a-web-8k2mz", nsEndpoint)
	}
	cases := map[string]struct {
		reason string
		keys   [2]map[string]any
		want   map[string]any
	}{
		"NoSchedule": {
			reason: "Keys that report no schedule leave the XR's status without rotation.",
			want:   nil,
		},
		"Earliest": {
			reason: "The XR shows the earliest next rotation, and the earliest revocation of a replaced key during an overlap.",
			keys: [2]map[string]any{
				{"nextRotationAt": "2026-12-27T11:04:24Z", "previous": map[string]any{"name": "a", "revokeAt": "2026-11-28T11:04:24Z"}},
				{"nextRotationAt": "2026-12-20T08:00:00Z"},
			},
			want: map[string]any{"nextRotationAt": "2026-12-20T08:00:00Z", "previousKeysRevokeAt": "2026-11-28T11:04:24Z"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := map[string]*fnv1.Resource{"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil)}
			for i, at := range tc.keys {
				k := nsKey(i)
				if at != nil {
					k = nsKey(i, set("status.atProvider", at))
				}
				obs[string(keyResourceName(i))] = observed(k, ready(i))
			}
			f, err := NewFunction()
			if err != nil {
				t.Fatal(err)
			}
			xr := nsXR(set("spec.rotation", map[string]any{"period": "720h"}))
			rsp, err := f.RunFunction(t.Context(), testRequest{xr: xr, input: policyInput(set("rotation", rotationBounds())), observed: obs}.build())
			if err != nil {
				t.Fatal(err)
			}
			st, _ := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
			var got map[string]any
			if r, ok := st["rotation"].(map[string]any); ok {
				got = r
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatus.rotation: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
