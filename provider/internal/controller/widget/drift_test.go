package widget

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestRecordDrift(t *testing.T) {
	at := time.Date(2026, 11, 29, 17, 0, 0, 500, time.FixedZone("CET", 3600))
	long := `description: want "` + strings.Repeat("é", 300) + `", have ""`
	cases := map[string]struct {
		reason string
		before *commonv1beta1.DriftRepairs
		change string
		want   *commonv1beta1.DriftRepairs
	}{
		"First": {
			reason: "The first repair starts the count, dated in UTC to the second.",
			change: `size: want "large", have "small"`,
			want:   &commonv1beta1.DriftRepairs{Count: 1, LastAt: metav1.NewTime(time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)), LastChange: `size: want "large", have "small"`},
		},
		"Again": {
			reason: "A later repair counts on and replaces the date and the change.",
			before: &commonv1beta1.DriftRepairs{Count: 7, LastChange: "old"},
			change: "new",
			want:   &commonv1beta1.DriftRepairs{Count: 8, LastAt: metav1.NewTime(time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)), LastChange: "new"},
		},
		"LongChangeCut": {
			reason: "A change longer than the bound is cut on a character boundary, marked with an ellipsis.",
			change: long,
			want: &commonv1beta1.DriftRepairs{Count: 1, LastAt: metav1.NewTime(time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC)),
				LastChange: string([]rune(long)[:commonv1beta1.MaxDriftChangeLength-3]) + "..."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := &nsv1beta1.Widget{}
			mg.SetDriftRepairs(tc.before)
			recordDrift(mg, at, tc.change)
			if diff := cmp.Diff(tc.want, mg.GetDriftRepairs()); diff != "" {
				t.Errorf("%s\nstatus.drift: -want, +got:\n%s", tc.reason, diff)
			}
			if n := len([]rune(mg.GetDriftRepairs().LastChange)); n > commonv1beta1.MaxDriftChangeLength {
				t.Errorf("%s\nlastChange has %d characters, more than %d", tc.reason, n, commonv1beta1.MaxDriftChangeLength)
			}
		})
	}
}
