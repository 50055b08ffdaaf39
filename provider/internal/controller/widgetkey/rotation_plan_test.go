package widgetkey

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

func TestRotatedName(t *testing.T) {
	long := strings.Repeat("a", 60) + "-bcd"
	dashed := strings.Repeat("a", 58) + "-bcdef"
	cases := map[string]struct {
		reason string
		base   string
		n      int
		want   string
	}{
		"Short":   {reason: "A short base name gets -r<n>.", base: "team-a-ci-1a2b3c4d", n: 1, want: "team-a-ci-1a2b3c4d-r1"},
		"Many":    {reason: "Generations count up without bound.", base: "ci", n: 12345, want: "ci-r12345"},
		"Long":    {reason: "A base of 63 characters is shortened to fit the suffix.", base: long[:63], n: 2, want: long[:60] + "-r2"},
		"NoDash":  {reason: "Shortening never leaves a dash before the suffix.", base: dashed, n: 10, want: strings.Repeat("a", 58) + "-r10"},
		"Longest": {reason: "The result is at most 63 characters.", base: strings.Repeat("x", 63), n: 999, want: strings.Repeat("x", 58) + "-r999"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := rotatedName(tc.base, tc.n)
			if got != tc.want {
				t.Errorf("%s\nrotatedName(%q, %d): want %q, got %q", tc.reason, tc.base, tc.n, tc.want, got)
			}
			if !widgetapi.ValidName(got) {
				t.Errorf("%s\nrotatedName(%q, %d) = %q is not a valid key name", tc.reason, tc.base, tc.n, got)
			}
			if g := generation(tc.base, got); g != tc.n {
				t.Errorf("%s\ngeneration(%q, %q): want %d, got %d", tc.reason, tc.base, got, tc.n, g)
			}
		})
	}
}

func TestGeneration(t *testing.T) {
	cases := map[string]struct {
		reason string
		name   string
		want   int
	}{
		"Base":          {reason: "The external name's key is generation 0.", name: "ci", want: 0},
		"Rotated":       {reason: "ci-r3 is the third rotation's key.", name: "ci-r3", want: 3},
		"Zero":          {reason: "There is no rotation 0.", name: "ci-r0", want: -1},
		"LeadingZero":   {reason: "A name rotatedName would not make is not of the family.", name: "ci-r01", want: -1},
		"OtherFamily":   {reason: "Another key's rotations are not of this family.", name: "cid-r1", want: -1},
		"NotANumber":    {reason: "A suffix that is not a number is not of the family.", name: "ci-rx", want: -1},
		"Unrelated":     {reason: "An unrelated key is not of the family.", name: "deploy", want: -1},
		"NestedRotated": {reason: "A rotation of a rotated name is not of the family.", name: "ci-r1-r1", want: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := generation("ci", tc.name); got != tc.want {
				t.Errorf("%s\ngeneration(%q, %q): want %d, got %d", tc.reason, "ci", tc.name, tc.want, got)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := t0.Add
	key := func(name string, created time.Duration) *widgetapi.Key {
		return &widgetapi.Key{ID: "id-" + name, Name: name, Widget: widgetName, CreatedAt: at(created)}
	}
	secret := func(cur, prev string) map[string][]byte {
		d := map[string][]byte{DetailKey: []byte("wks_" + cur), DetailKeyName: []byte(cur)}
		if prev != "" {
			d[DetailPreviousKey], d[DetailPreviousKeyName] = []byte("wks_"+prev), []byte(prev)
		}
		return d
	}
	rot := func(period, overlap time.Duration, requested *time.Time) *commonv1beta1.KeyRotation {
		r := &commonv1beta1.KeyRotation{Overlap: metav1.Duration{Duration: overlap}}
		if period > 0 {
			r.Period = &metav1.Duration{Duration: period}
		}
		if requested != nil {
			r.RequestedAt = ptr.To(metav1.NewTime(*requested))
		}
		return r
	}
	revokeAt := func(r *commonv1beta1.KeyRotation, t time.Time) *commonv1beta1.KeyRotation {
		r.RevokePreviousAt = ptr.To(metav1.NewTime(t))
		return r
	}
	type want struct {
		current, previous string
		unused            []string
		revokePrevious    bool
		rotate            bool
		next              time.Time
		honours           bool
	}
	cases := map[string]struct {
		reason   string
		rotation *commonv1beta1.KeyRotation
		status   commonv1beta1.WidgetKeyObservation
		owned    []*widgetapi.Key
		secret   map[string][]byte
		now      time.Time
		want     want
	}{
		"NotDue": {
			reason:   "A key younger than the period is kept; the next rotation is a period after its creation.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(23 * time.Hour),
			want:     want{current: "ci", next: at(24 * time.Hour)},
		},
		"Due": {
			reason:   "A key as old as the period is rotated.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(24 * time.Hour),
			want:     want{current: "ci", rotate: true, next: at(24 * time.Hour)},
		},
		"InOverlap": {
			reason:   "During the overlap the previous key stays, and the next rotation is a period after the current key's creation.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(24*time.Hour + 59*time.Minute),
			want:     want{current: "ci-r1", previous: "ci", next: at(48 * time.Hour)},
		},
		"OverlapOver": {
			reason:   "Once the overlap after the current key's creation has passed, the previous key is revoked.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(25 * time.Hour),
			want:     want{current: "ci-r1", previous: "ci", revokePrevious: true, next: at(48 * time.Hour)},
		},
		"RevokePreviousNow": {
			reason:   "revokePreviousAt cuts the overlap short: a previous key created before it is revoked once it has passed.",
			rotation: revokeAt(rot(24*time.Hour, time.Hour, nil), at(24*time.Hour+10*time.Minute)),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(24*time.Hour + 10*time.Minute),
			want:     want{current: "ci-r1", previous: "ci", revokePrevious: true, next: at(48 * time.Hour)},
		},
		"RevokePreviousScheduled": {
			reason:   "A revokePreviousAt in the future waits, and the next rotation (due earlier) waits for it, not for the end of the overlap.",
			rotation: revokeAt(rot(24*time.Hour, 12*time.Hour, ptr.To(at(24*time.Hour+5*time.Minute))), at(24*time.Hour+30*time.Minute)),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(24*time.Hour + 10*time.Minute),
			want:     want{current: "ci-r1", previous: "ci", next: at(24*time.Hour + 30*time.Minute), honours: true},
		},
		"RevokePreviousLeftInPlace": {
			reason:   "A revokePreviousAt earlier than the previous key's creation does not shorten a later rotation's overlap.",
			rotation: revokeAt(rot(24*time.Hour, time.Hour, nil), at(time.Minute)),
			owned:    []*widgetapi.Key{key("ci-r1", 24*time.Hour), key("ci-r2", 48*time.Hour)},
			secret:   secret("ci-r2", "ci-r1"),
			now:      at(48*time.Hour + 10*time.Minute),
			want:     want{current: "ci-r2", previous: "ci-r1", next: at(72 * time.Hour)},
		},
		"RevokePreviousAfterOverlap": {
			reason:   "A revokePreviousAt later than the end of the overlap changes nothing: the overlap ends first.",
			rotation: revokeAt(rot(24*time.Hour, time.Hour, nil), at(30*time.Hour)),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(25 * time.Hour),
			want:     want{current: "ci-r1", previous: "ci", revokePrevious: true, next: at(48 * time.Hour)},
		},
		"UnusedKey": {
			reason:   "A key of the family the Secret names in neither entry (a crash after a rotation's create) is revoked.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci", ""),
			now:      at(24*time.Hour + time.Second),
			want:     want{current: "ci", unused: []string{"ci-r1"}, rotate: true, next: at(24 * time.Hour)},
		},
		"PreviousGone": {
			reason:   "A previous key that is gone from the API (a crash after its revocation) is no previous key.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(26 * time.Hour),
			want:     want{current: "ci-r1", next: at(48 * time.Hour)},
		},
		"CurrentRevokedOutside": {
			reason:   "When the Secret's key is gone, there is no current key: the keys are lost (Observe hands them all to Create).",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci-r1", "ci"),
			now:      at(26 * time.Hour),
			want:     want{previous: "ci"},
		},
		"NoSecret": {
			reason:   "Without a Secret there is no current key.",
			rotation: rot(24*time.Hour, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0)},
			now:      at(time.Hour),
			want:     want{unused: []string{"ci"}},
		},
		"RequestedNow": {
			reason:   "A requestedAt after the current key's creation and not in the future rotates now, before the period.",
			rotation: rot(24*time.Hour, time.Hour, ptr.To(at(2*time.Hour))),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(2*time.Hour + time.Second),
			want:     want{current: "ci", rotate: true, next: at(2 * time.Hour), honours: true},
		},
		"RequestedInFuture": {
			reason:   "A requestedAt in the future schedules the rotation.",
			rotation: rot(24*time.Hour, time.Hour, ptr.To(at(5*time.Hour))),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(2 * time.Hour),
			want:     want{current: "ci", next: at(5 * time.Hour)},
		},
		"RequestedBeforeCurrentKey": {
			reason:   "A requestedAt before the current key's creation was honoured already.",
			rotation: rot(24*time.Hour, time.Hour, ptr.To(at(-time.Hour))),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(2 * time.Hour),
			want:     want{current: "ci", next: at(24 * time.Hour)},
		},
		"RequestedAlreadyHonoured": {
			reason:   "A requestedAt the status says a rotation honoured is not honoured again (the API's clock may lag).",
			rotation: rot(24*time.Hour, time.Hour, ptr.To(at(2*time.Hour))),
			status:   commonv1beta1.WidgetKeyObservation{RotationRequestedAt: ptr.To(metav1.NewTime(at(2 * time.Hour)))},
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(3 * time.Hour),
			want:     want{current: "ci", next: at(24 * time.Hour)},
		},
		"RequestedDuringOverlap": {
			reason:   "A rotation requested during an overlap waits for the previous key's revocation.",
			rotation: rot(24*time.Hour, time.Hour, ptr.To(at(24*time.Hour+10*time.Minute))),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(24*time.Hour + 20*time.Minute),
			want:     want{current: "ci-r1", previous: "ci", next: at(25 * time.Hour), honours: true},
		},
		"RequestedAtOverlapEnd": {
			reason:   "Once the overlap has passed, a pending request revokes the previous key and rotates in one go.",
			rotation: rot(24*time.Hour, time.Hour, ptr.To(at(24*time.Hour+10*time.Minute))),
			owned:    []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret:   secret("ci-r1", "ci"),
			now:      at(25 * time.Hour),
			want:     want{current: "ci-r1", previous: "ci", revokePrevious: true, rotate: true, next: at(24*time.Hour + 10*time.Minute), honours: true},
		},
		"OnDemandOnly": {
			reason:   "Without a period nothing is scheduled.",
			rotation: rot(0, time.Hour, nil),
			owned:    []*widgetapi.Key{key("ci", 0)},
			secret:   secret("ci", ""),
			now:      at(1000 * time.Hour),
			want:     want{current: "ci"},
		},
		"RotationTurnedOff": {
			reason: "With rotation removed during an overlap, the previous key is revoked when the status said it would be.",
			status: commonv1beta1.WidgetKeyObservation{Previous: &commonv1beta1.PreviousKeyObservation{Name: "ci", RevokeAt: ptr.To(metav1.NewTime(at(25 * time.Hour)))}},
			owned:  []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret: secret("ci-r1", "ci"),
			now:    at(25 * time.Hour),
			want:   want{current: "ci-r1", previous: "ci", revokePrevious: true},
		},
		"RotationTurnedOffNoStatus": {
			reason: "With rotation removed and the status lost, the previous key keeps the shortest overlap.",
			owned:  []*widgetapi.Key{key("ci", 0), key("ci-r1", 24*time.Hour)},
			secret: secret("ci-r1", "ci"),
			now:    at(24*time.Hour + 4*time.Minute),
			want:   want{current: "ci-r1", previous: "ci"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := newNamespaced()
			explicitName("ci")(mg)
			mg.Spec.ForProvider.Rotation = tc.rotation
			mg.SetWidgetKeyObservation(tc.status)
			owned := map[string]*widgetapi.Key{}
			for _, k := range tc.owned {
				owned[k.Name] = k
			}
			p := (&external[*nsv1beta1WidgetKey]{}).plan(mg, owned, tc.secret, tc.now)
			got := want{unused: p.unused, revokePrevious: p.revokePrevious, rotate: p.rotate, next: p.next, honours: p.honours != nil}
			if p.current != nil {
				got.current = p.current.Name
			}
			if p.previous != nil {
				got.previous = p.previous.Name
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nplan: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
