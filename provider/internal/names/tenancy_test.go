package names

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/google/go-cmp/cmp"
)

// long50 is a namespace too long for a marker to spell out with a long
// name: "n_" + 50 characters + "." does not survive shortening to 63.
var long50 = "team-" + strings.Repeat("x", 45)

// alpha and bravo are two 55-character namespaces that share their first 50
// characters, as in finding M4 of issue 42.
const (
	alpha = "team-payments-europe-west-production-cluster-00001alpha"
	bravo = "team-payments-europe-west-production-cluster-00001bravo"
)

func TestMarkers(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		want   map[string]string
	}{
		"Namespaced": {
			reason: "A namespaced resource's marker spells out its namespace: one label.",
			mg:     nsWidget("team-a", "web"),
			want:   map[string]string{OwnerLabel: "n_team-a.web"},
		},
		"LongNamespace": {
			reason: "A namespace the shortened marker cannot hold is recorded in the namespace label.",
			mg:     nsWidget(long50, "web-frontend-server"),
			want:   map[string]string{OwnerLabel: "n_team-xxxxxxxxxxxxxxxxxxxxxxxxxxxxx-ksujxcqnecjiryu6sqsiydkqme", OwnerNamespaceLabel: long50},
		},
		"SharedPrefixAlpha": {
			reason: "A shortened marker keeps 36 characters and 128 bits of a hash of namespace and name (26 base32 characters), and the whole namespace.",
			mg:     nsWidget(alpha, "web-frontend"),
			want:   map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", OwnerNamespaceLabel: alpha},
		},
		"SharedPrefixBravo": {
			reason: "A namespace that shares alpha's first 50 characters shares the marker's head, not its hash.",
			mg:     nsWidget(bravo, "web-frontend"),
			want:   map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-2wfpfaktjkgmkgbegjqgihpkoe", OwnerNamespaceLabel: bravo},
		},
		"LongClusterName": {
			reason: "A long cluster-scoped name is shortened the same way.",
			mg:     clWidget("a-very-long-cluster-scoped-widget-name-that-does-not-fit-anywhere"),
			want:   map[string]string{OwnerLabel: "c_a-very-long-cluster-scoped-widget-55hstk4lu6sccbyw32atveshrm"},
		},
		"LongNameOnly": {
			reason: "A long name is shortened after the namespace, which stays readable: one label.",
			mg:     nsWidget("team-a", strings.Repeat("n", 80)),
			want:   map[string]string{OwnerLabel: Owner(nsWidget("team-a", strings.Repeat("n", 80)))},
		},
		"Cluster": {
			reason: "A cluster-scoped resource has no namespace to record.",
			mg:     clWidget("web"),
			want:   map[string]string{OwnerLabel: "c_web"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Markers(tc.mg)); diff != "" {
				t.Errorf("%s\nMarkers(...): -want, +got:\n%s", tc.reason, diff)
			}
			for k, v := range Markers(tc.mg) {
				if len(v) > 63 {
					t.Errorf("%s\nMarkers(...)[%s] = %q is longer than a label value may be", tc.reason, k, v)
				}
			}
		})
	}
}

func TestOwnerNamespace(t *testing.T) {
	cases := map[string]struct {
		reason string
		labels map[string]string
		want   string
		wantOK bool
	}{
		"Marker":        {reason: "A namespaced marker names the namespace before its first '.'.", labels: map[string]string{OwnerLabel: "n_team-a.web.x"}, want: "team-a", wantOK: true},
		"Label":         {reason: "A marker shortened before its '.' names its namespace in the namespace label.", labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", OwnerNamespaceLabel: alpha}, want: alpha, wantOK: true},
		"SameInBoth":    {reason: "A namespace label that repeats what the marker spells out is the same namespace.", labels: map[string]string{OwnerLabel: "n_team-a.web", OwnerNamespaceLabel: "team-a"}, want: "team-a", wantOK: true},
		"Disagree":      {reason: "A namespace label that contradicts the marker is forged: neither is believed.", labels: map[string]string{OwnerLabel: "n_team-a.web", OwnerNamespaceLabel: "team-b"}},
		"ClusterLabel":  {reason: "A namespace label on a cluster-scoped marker names no namespace.", labels: map[string]string{OwnerLabel: "c_web", OwnerNamespaceLabel: "team-a"}},
		"Shortened":     {reason: "A marker shortened before its '.' cannot say.", labels: map[string]string{OwnerLabel: "n_team-" + strings.Repeat("x", 45) + "-0123456789"}},
		"Cluster":       {reason: "A cluster-scoped marker has no namespace.", labels: map[string]string{OwnerLabel: "c_web"}},
		"Foreign":       {reason: "A marker this provider did not write has no namespace.", labels: map[string]string{OwnerLabel: "terraform"}},
		"EmptyMarkerNS": {reason: "A marker with an empty namespace says nothing.", labels: map[string]string{OwnerLabel: "n_.web"}},
		"None":          {reason: "No labels, no owner.", labels: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := OwnerNamespace(tc.labels)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("%s\nOwnerNamespace(%v): want %q, %t; got %q, %t", tc.reason, tc.labels, tc.want, tc.wantOK, got, ok)
			}
		})
	}
}

func TestReaches(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		labels map[string]string
		want   bool
	}{
		"Own":             {reason: "A resource reaches what it owns.", mg: nsWidget("team-a", "key"), labels: map[string]string{OwnerLabel: "n_team-a.key"}, want: true},
		"SameNamespace":   {reason: "A resource reaches what another resource of its namespace owns.", mg: nsWidget("team-a", "key"), labels: map[string]string{OwnerLabel: "n_team-a.web"}, want: true},
		"OtherNamespace":  {reason: "Another namespace's widget is out of reach.", mg: nsWidget("team-a", "key"), labels: map[string]string{OwnerLabel: "n_team-b.web"}},
		"PrefixNamespace": {reason: "A namespace that merely starts like ours is another namespace.", mg: nsWidget("team", "key"), labels: map[string]string{OwnerLabel: "n_team-a.web"}},
		"Cluster":         {reason: "A cluster-scoped resource's widget is out of a namespace's reach.", mg: nsWidget("team-a", "key"), labels: map[string]string{OwnerLabel: "c_team-a.web"}},
		"Unowned":         {reason: "An unowned widget is out of a namespace's reach.", mg: nsWidget("team-a", "key"), labels: map[string]string{"team": "a"}},
		"LabelOnly":       {reason: "A long namespace is read from the namespace label.", mg: nsWidget(long50, "key"), labels: Markers(nsWidget(long50, "web-frontend-server")), want: true},
		"LongOtherNS":     {reason: "A long namespace label naming another namespace is out of reach.", mg: nsWidget(long50+"y", "key"), labels: Markers(nsWidget(long50, "web-frontend-server"))},
		"CollidingMarker": {
			reason: "Finding M4: a name of bravo whose (40-bit) marker equals the one on alpha's widget does not reach it: the widget's namespace is alpha.",
			mg:     nsWidget(bravo, "probe-000001"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-b89f23b543", OwnerNamespaceLabel: alpha},
		},
		"ForgedNamespace": {
			reason: "A marker equal to the resource's own under a namespace label that names another namespace is not reached.",
			mg:     nsWidget("team-a", "key"),
			labels: map[string]string{OwnerLabel: "n_team-a.key", OwnerNamespaceLabel: "team-b"},
		},
		"SharedPrefixOther": {
			reason: "Alpha's widget is out of reach of a resource of bravo with the same name.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", OwnerNamespaceLabel: alpha},
		},
		"ClusterResource": {reason: "A cluster-scoped resource reaches anything its ProviderConfig reaches.", mg: clWidget("key"), labels: map[string]string{OwnerLabel: "n_team-b.web"}, want: true},
		"ClusterUnowned":  {reason: "A cluster-scoped resource reaches unowned widgets.", mg: clWidget("key"), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Reaches(tc.mg, tc.labels); got != tc.want {
				t.Errorf("%s\nReaches(%s/%s, %v): want %t, got %t", tc.reason, tc.mg.GetNamespace(), tc.mg.GetName(), tc.labels, tc.want, got)
			}
		})
	}
}
