package apis_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// rotatingKey is a namespaced v1beta1 WidgetKey that rotates with r and
// writes its connection Secret.
func rotatingKey(r *commonv1beta1.KeyRotation) *namespacedv1beta1.WidgetKey {
	return nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
		ManagedResourceSpec: xpv2.ManagedResourceSpec{WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: "s"}},
		ForProvider:         namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1"), Rotation: r},
	})
}

func duration(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

// rotationWriteCases are writes of spec.forProvider.rotation in v1beta1.
func rotationWriteCases() map[string]writeCase {
	rot := func(period, overlap string) *commonv1beta1.KeyRotation {
		r := &commonv1beta1.KeyRotation{Overlap: *duration(overlap)}
		if period != "" {
			r.Period = duration(period)
		}
		return r
	}
	return map[string]writeCase{
		"Valid": {
			reason: "A 30-day period with a day's overlap must be accepted.",
			create: rotatingKey(rot("720h", "24h")),
		},
		"AtTheMinimums": {
			reason: "A period of 1h and an overlap of 5m are the shortest accepted.",
			create: rotatingKey(rot("1h", "5m")),
		},
		"OnDemandOnly": {
			reason: "A rotation without a period rotates only when requestedAt asks.",
			create: rotatingKey(&commonv1beta1.KeyRotation{Overlap: *duration("1h"), RequestedAt: ptr.To(metav1.Unix(1700000000, 0))}),
		},
		"PeriodTooShort": {
			reason:  "A period under an hour must be refused.",
			create:  rotatingKey(rot("59m", "5m")),
			wantErr: rulePeriodMin.Message,
		},
		"PeriodTooLong": {
			reason:  "A period over ten years must be refused.",
			create:  rotatingKey(rot("87601h", "5m")),
			wantErr: rulePeriodMax.Message,
		},
		"OverlapTooShort": {
			reason:  "An overlap under five minutes leaves consumers no time to switch and must be refused.",
			create:  rotatingKey(rot("1h", "4m59s")),
			wantErr: ruleOverlapMin.Message,
		},
		"OverlapLongerThanPeriod": {
			reason:  "An overlap longer than the period must be refused.",
			create:  rotatingKey(rot("2h", "3h")),
			wantErr: ruleOverlapShorterThanPeriod.Message,
		},
		"OverlapEqualToPeriod": {
			reason:  "An overlap as long as the period must be refused: the previous key would still be valid when the next rotation is due.",
			create:  rotatingKey(rot("2h", "2h")),
			wantErr: ruleOverlapShorterThanPeriod.Message,
		},
		"WithoutConnectionSecret": {
			reason: "A rotating key needs a connection Secret to publish its new secret to.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
				ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1"), Rotation: rot("720h", "24h")},
			}),
			wantErr: ruleRotationNeedsSecret.Message,
		},
		"WithoutUpdate": {
			reason: "A key Crossplane does not update cannot rotate: the managed reconciler rotates in Update.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{
					WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: "s"},
					ManagementPolicies:               xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionDelete},
				},
				ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1"), Rotation: rot("720h", "24h")},
			}),
			wantErr: ruleRotationNeedsCreateDelete.Message,
		},
		"RequestedAtSet": {
			reason: "Setting requestedAt on a rotating key (rotate now) must be accepted.",
			create: rotatingKey(rot("720h", "24h")),
			patch:  `{"spec":{"forProvider":{"rotation":{"requestedAt":"2026-11-27T10:00:00Z"}}}}`,
		},
		"RequestedAtNotATime": {
			reason:  "A requestedAt that is not an RFC 3339 time must be refused.",
			create:  rotatingKey(rot("720h", "24h")),
			patch:   `{"spec":{"forProvider":{"rotation":{"requestedAt":"now"}}}}`,
			wantErr: "spec.forProvider.rotation.requestedAt",
		},
		"PeriodShortenedBelowOverlap": {
			reason:  "An update that makes the period shorter than the overlap must be refused.",
			create:  rotatingKey(rot("720h", "24h")),
			patch:   `{"spec":{"forProvider":{"rotation":{"period":"12h"}}}}`,
			wantErr: ruleOverlapShorterThanPeriod.Message,
		},
		"PeriodNotADuration": {
			reason:  "A period that is not a Go duration (days are not a unit) must be refused.",
			create:  rotatingKey(rot("720h", "24h")),
			patch:   `{"spec":{"forProvider":{"rotation":{"period":"30d"}}}}`,
			wantErr: "spec.forProvider.rotation.period",
		},
		"OverlapRemoved": {
			reason:  "The overlap cannot be removed from a rotation.",
			create:  rotatingKey(rot("720h", "24h")),
			patch:   `{"spec":{"forProvider":{"rotation":{"overlap":null}}}}`,
			wantErr: "spec.forProvider.rotation.overlap: Required value",
		},
		"ClusterPeriodTooShort": {
			reason: "A cluster-scoped key's rotation is checked the same way.",
			create: clKeyV1beta1(clusterv1beta1.WidgetKeySpec{
				ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{WriteConnectionSecretToReference: &xpv2.SecretReference{Name: "s", Namespace: "team-a"}},
				ForProvider:                clusterv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1"), Rotation: rot("30m", "5m")},
			}),
			wantErr: rulePeriodMin.Message,
		},
	}
}

// testRotationAnnotation writes a rotation through a v1alpha1 WidgetKey's
// field-conversions annotation, which v1alpha1's schema does not check: the
// conversion to v1beta1 refuses what v1beta1 would.
func testRotationAnnotation(t *testing.T, c client.Client) {
	cases := map[string]struct {
		reason    string
		rotation  map[string]any
		wantAlpha string
	}{
		"Valid": {
			reason:   "A rotation v1beta1 accepts is accepted through the annotation and stored.",
			rotation: map[string]any{"period": "720h0m0s", "overlap": "24h0m0s"},
		},
		"PeriodTooShort": {
			reason:    "A period under an hour is refused through the annotation too.",
			rotation:  map[string]any{"period": "1m0s", "overlap": "5m0s"},
			wantAlpha: "spec.forProvider.rotation.period: Invalid value",
		},
		"OverlapLongerThanPeriod": {
			reason:    "An overlap longer than the period is refused through the annotation too.",
			rotation:  map[string]any{"period": "2h0m0s", "overlap": "3h0m0s"},
			wantAlpha: "overlap must be shorter than period",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, err := json.Marshal(map[string]any{"spec.forProvider.rotation": tc.rotation})
			if err != nil {
				t.Fatal(err)
			}
			alpha := &namespacedv1alpha1.WidgetKey{ObjectMeta: metav1.ObjectMeta{
				Namespace:   testNamespace,
				Name:        "rotation-alpha-" + strings.ToLower(name),
				Annotations: map[string]string{fieldConversions: string(a)},
			}}
			alpha.Spec.ForProvider = namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1"), WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{}}
			alpha.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "s"}
			checkWrite(t, tc.reason, "v1alpha1", c.Create(ctx, alpha), tc.wantAlpha)
			if tc.wantAlpha != "" {
				return
			}
			got := &namespacedv1beta1.WidgetKey{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(alpha), got); err != nil {
				t.Fatalf("Get() in v1beta1: %v", err)
			}
			want := &commonv1beta1.KeyRotation{Period: duration("720h"), Overlap: *duration("24h")}
			if diff := cmp.Diff(want, got.Spec.ForProvider.Rotation); diff != "" {
				t.Errorf("%s\nstored rotation: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
