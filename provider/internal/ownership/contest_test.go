package ownership

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestElsewhere(t *testing.T) {
	cases := map[string]struct {
		labels map[string]string
		cp     string
		want   string
		ok     bool
	}{
		"Other":         {labels: map[string]string{ControlPlaneLabel: "a"}, cp: "b", want: "a", ok: true},
		"Own":           {labels: map[string]string{ControlPlaneLabel: "b"}, cp: "b", want: "b"},
		"NoneOnWidget":  {labels: map[string]string{OwnerLabel: "c_web"}, cp: "b"},
		"ProviderNamed": {labels: map[string]string{ControlPlaneLabel: "a"}, want: "a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Elsewhere(tc.labels, tc.cp)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Elsewhere(%v, %q): want %q, %t; got %q, %t", tc.labels, tc.cp, tc.want, tc.ok, got, ok)
			}
		})
	}
}

func TestContestOf(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(-d).Unix(), 10) }
	cases := map[string]struct {
		reason string
		labels map[string]string
		want   Contest
		ok     bool
		said   bool
	}{
		"Fresh": {
			reason: "A contest said a minute ago by another control plane counts.",
			labels: map[string]string{ContenderLabel: "a", ContendedAtLabel: at(time.Minute)},
			want:   Contest{By: "a", At: now.Add(-time.Minute)}, ok: true,
		},
		"AtTTL": {
			reason: "A contest exactly ContestTTL old still counts.",
			labels: map[string]string{ContenderLabel: "a", ContendedAtLabel: at(ContestTTL)},
			want:   Contest{By: "a", At: now.Add(-ContestTTL)}, ok: true,
		},
		"Stale": {
			reason: "A contest older than ContestTTL is over.",
			labels: map[string]string{ContenderLabel: "a", ContendedAtLabel: at(ContestTTL + time.Second)},
		},
		"Own": {
			reason: "A control plane's own contest is no contest against it; it was said, so it need not be said again yet.",
			labels: map[string]string{ContenderLabel: "b", ContendedAtLabel: at(time.Minute)},
			said:   true,
		},
		"OwnBeyondRefresh": {
			reason: "A control plane's own contest older than ContestRefresh must be said again.",
			labels: map[string]string{ContenderLabel: "b", ContendedAtLabel: at(ContestRefresh + time.Second)},
		},
		"Future": {
			reason: "A contest dated beyond the clock skew allowed was not written by a provider.",
			labels: map[string]string{ContenderLabel: "a", ContendedAtLabel: at(-2 * maxClockSkew)},
		},
		"Garbled": {
			reason: "A time that is not Unix seconds does not count.",
			labels: map[string]string{ContenderLabel: "a", ContendedAtLabel: "yesterday"},
		},
		"NoContender": {
			reason: "A time without a contender is no contest.",
			labels: map[string]string{ContendedAtLabel: at(time.Minute)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ContestOf(tc.labels, "b", now)
			if ok != tc.ok {
				t.Errorf("%s\nContestOf(...): want ok %t, got %t", tc.reason, tc.ok, ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nContestOf(...): -want, +got:\n%s", tc.reason, diff)
			}
			if said := Said(tc.labels, "b", now); said != tc.said {
				t.Errorf("%s\nSaid(...): want %t, got %t", tc.reason, tc.said, said)
			}
		})
	}
}

func TestTakenOver(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for name, tc := range map[string]struct {
		labels map[string]string
		ok     bool
	}{
		"Recent": {labels: TakeOverLabels(now.Add(-time.Minute)), ok: true},
		"Old":    {labels: TakeOverLabels(now.Add(-ContestTTL - time.Second))},
		"None":   {labels: map[string]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := TakenOver(tc.labels, now); ok != tc.ok {
				t.Errorf("TakenOver(%v): want %t, got %t", tc.labels, tc.ok, ok)
			}
		})
	}
}

func TestContestLabels(t *testing.T) {
	mg := nsWidget("team-a", "web")
	all := map[string]string{
		"team":            "a",
		OwnerLabel:        Marker(mg),
		ControlPlaneLabel: "a",
		ReleasedByLabel:   "team-a",
		ContenderLabel:    "b",
		ContendedAtLabel:  "1800000000",
		TakenOverAtLabel:  "1800000000",
	}
	if diff := cmp.Diff(map[string]string{"team": "a"}, Without(all)); diff != "" {
		t.Errorf("Without(...) keeps markers or a contest: -want, +got:\n%s", diff)
	}
	wantOf := map[string]string{OwnerLabel: Marker(mg), ControlPlaneLabel: "a", ReleasedByLabel: "team-a"}
	if diff := cmp.Diff(wantOf, Of(all)); diff != "" {
		t.Errorf("Of(...): markers only, a contest is not one: -want, +got:\n%s", diff)
	}
	wantContest := map[string]string{ContenderLabel: "b", ContendedAtLabel: "1800000000", TakenOverAtLabel: "1800000000"}
	if diff := cmp.Diff(wantContest, ContestLabelsOf(all)); diff != "" {
		t.Errorf("ContestLabelsOf(...): -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{OwnerLabel: Marker(mg), ControlPlaneLabel: "b"}, Labels(mg, "b")); diff != "" {
		t.Errorf("Labels(mg, b): -want, +got:\n%s", diff)
	}
	if _, ok := Labels(mg, "")[ControlPlaneLabel]; ok {
		t.Error("Labels(mg, \"\") names a control plane")
	}
}
