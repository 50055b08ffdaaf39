package widget

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// recordDrift counts a drift repair in mg's status.drift, dated at, with
// what it restored (change, cut to commonv1beta1.MaxDriftChangeLength
// characters). A fleet report reads it there (docs/operations.md); the
// event and the metric say the same per repair.
func recordDrift(mg commonv1beta1.WidgetResource, at time.Time, change string) {
	n := int64(1)
	if d := mg.GetDriftRepairs(); d != nil {
		n = d.Count + 1
	}
	if r := []rune(change); len(r) > commonv1beta1.MaxDriftChangeLength {
		change = string(r[:commonv1beta1.MaxDriftChangeLength-3]) + "..."
	}
	mg.SetDriftRepairs(&commonv1beta1.DriftRepairs{Count: n, LastAt: metav1.NewTime(at.UTC().Truncate(time.Second)), LastChange: change})
}
