package widgetkey

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// TestNextWakeUp pins what the poll hook is told a WidgetKey waits for
// (mrsetup.WithWakeUp): whichever of its next rotation and its previous
// key's revocation comes first.
func TestNextWakeUp(t *testing.T) {
	rotation := metav1.NewTime(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	revokeSooner := metav1.NewTime(time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC))
	revokeLater := metav1.NewTime(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		reason string
		o      commonv1beta1.WidgetKeyObservation
		want   time.Time
	}{
		"Nothing": {
			reason: "A key that does not rotate has nothing scheduled.",
		},
		"Rotation": {
			reason: "Without a previous key, the next rotation.",
			o:      commonv1beta1.WidgetKeyObservation{NextRotationAt: &rotation},
			want:   rotation.Time,
		},
		"RevocationFirst": {
			reason: "A previous key revoked before the next rotation: its revocation.",
			o:      commonv1beta1.WidgetKeyObservation{NextRotationAt: &rotation, Previous: &commonv1beta1.PreviousKeyObservation{RevokeAt: &revokeSooner}},
			want:   revokeSooner.Time,
		},
		"RotationFirst": {
			reason: "A rotation due before the previous key's revocation: the rotation.",
			o:      commonv1beta1.WidgetKeyObservation{NextRotationAt: &rotation, Previous: &commonv1beta1.PreviousKeyObservation{RevokeAt: &revokeLater}},
			want:   rotation.Time,
		},
		"RevocationOnly": {
			reason: "Rotation turned off during an overlap: the revocation is still scheduled.",
			o:      commonv1beta1.WidgetKeyObservation{Previous: &commonv1beta1.PreviousKeyObservation{RevokeAt: &revokeLater}},
			want:   revokeLater.Time,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k := &nsv1beta1.WidgetKey{}
			k.Status.AtProvider = tc.o
			if got := NextWakeUp(k); !got.Equal(tc.want) {
				t.Errorf("%s\nNextWakeUp(): want %s, got %s", tc.reason, tc.want, got)
			}
		})
	}
}
