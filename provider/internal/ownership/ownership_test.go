package ownership

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
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

// TestMarkersFit checks that the markers of resources whose names are too
// long for a label value are shortened to one, and stay distinct.
func TestMarkersFit(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   resource.Managed
	}{
		"LongNamespacedNames": {
			reason: "Long names that share a prefix get distinct markers.",
			a:      nsWidget(alpha, strings.Repeat("w", 40)), b: nsWidget(bravo, strings.Repeat("w", 40)),
		},
		"LongClusterNames": {
			reason: "Long cluster-scoped names that share a prefix get distinct markers.",
			a:      clWidget(strings.Repeat("c", 70) + "a"), b: clWidget(strings.Repeat("c", 70) + "b"),
		},
		"DashesAtTheCut": {
			reason: "A name cut where it has dashes still gets a marker of its own.",
			a:      nsWidget("team", strings.Repeat("a", 50)+strings.Repeat("-", 20)+"b"), b: nsWidget("team", "b"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ma, mb := Marker(tc.a), Marker(tc.b)
			if len(ma) > 63 || len(mb) > 63 || ma == mb {
				t.Errorf("%s\nMarker(...) = %q and %q: want distinct markers of at most 63 characters", tc.reason, ma, mb)
			}
		})
	}
}

func nsWidget(ns, name string) resource.Managed {
	return &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func clWidget(name string) resource.Managed {
	return &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestOwner(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   resource.Managed
		same   bool
	}{
		"SameResource":   {"a re-created resource with the same identity owns the widget again", nsWidget("a", "w"), nsWidget("a", "w"), true},
		"OtherNamespace": {"equal names in other namespaces are different owners", nsWidget("a", "w"), nsWidget("b", "w"), false},
		"ScopeDiffers":   {"a cluster-scoped resource never equals a namespaced one", nsWidget("a", "w"), clWidget("a.w"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			oa, ob := Marker(tc.a), Marker(tc.b)
			if (oa == ob) != tc.same {
				t.Errorf("%s: Marker() = %q and %q", tc.reason, oa, ob)
			}
			if len(oa) > 63 {
				t.Errorf("%s: marker %q exceeds a label value", tc.reason, oa)
			}
		})
	}
	// Namespaces are DNS labels (no dots), so the first dot splits namespace
	// from name unambiguously.
	for mg, want := range map[resource.Managed]string{
		nsWidget("team-a", "web"):    "namespaced managed resource team-a/web",
		nsWidget("team-a", "web.v2"): "namespaced managed resource team-a/web.v2",
		clWidget("web.v2"):           "cluster-scoped managed resource web.v2",
	} {
		if got := Describe(Marker(mg)); got != want {
			t.Errorf("Describe(Marker(%s/%s)) = %q, want %q", mg.GetNamespace(), mg.GetName(), got, want)
		}
	}
}

func TestDescribeOwner(t *testing.T) {
	cases := map[string]struct {
		reason string
		marker string
		want   string
	}{
		"Namespaced": {reason: "A namespaced marker names namespace and name.", marker: "n_team-a.web", want: "namespaced managed resource team-a/web"},
		"Cluster":    {reason: "A cluster-scoped marker names the resource.", marker: "c_web", want: "cluster-scoped managed resource web"},
		"Foreign":    {reason: "A marker this provider did not write is quoted as is.", marker: "terraform", want: "another owner (terraform)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Describe(tc.marker); got != tc.want {
				t.Errorf("%s\nDescribeOwner(%q): want %q, got %q", tc.reason, tc.marker, tc.want, got)
			}
		})
	}
}

// TestOwns checks the one ownership check: a marker equal to the
// resource's, current or from an older provider, in the resource's own
// namespace (finding M4 of issue 42).
func TestOwns(t *testing.T) {
	// The markers of alpha/web-frontend: now, and as provider versions
	// before 128-bit markers wrote them (a 52-character head and 40 bits).
	const (
		alphaWeb       = "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli"
		alphaWebLegacy = "n_team-payments-europe-west-production-cluster-00001-dde77bbf34"
	)
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		labels map[string]string
		want   bool
	}{
		"Own": {
			reason: "A resource owns what carries its markers.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: alphaWeb, NamespaceLabel: alpha},
			want:   true,
		},
		"OwnShort": {
			reason: "A marker that spells out the namespace needs no namespace label.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{OwnerLabel: "n_team-a.web"},
			want:   true,
		},
		"OwnLegacy": {
			reason: "A widget an older provider marked keeps its owner.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: alphaWebLegacy, NamespaceLabel: alpha},
			want:   true,
		},
		"SharedPrefix": {
			reason: "A resource of the same name in a namespace that shares alpha's first 50 characters does not own alpha's widget.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{OwnerLabel: alphaWeb, NamespaceLabel: alpha},
		},
		"CollidingLegacyMarker": {
			reason: "A name of bravo whose 40-bit legacy marker equals the one on alpha's widget does not own it: the namespace differs.",
			mg:     nsWidget(bravo, "probe-000001"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-b89f23b543", NamespaceLabel: alpha},
		},
		"ForgedNamespace": {
			reason: "The resource's own marker under another namespace's label is not the resource's.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{OwnerLabel: "n_team-a.web", NamespaceLabel: "team-b"},
		},
		"ForgedLongNamespace": {
			reason: "The resource's own shortened marker without its namespace label is not the resource's.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: alphaWeb},
		},
		"AnotherLegacy": {
			reason: "Another resource's legacy marker in the same namespace stays another's.",
			mg:     nsWidget(alpha, "other"),
			labels: map[string]string{OwnerLabel: alphaWebLegacy, NamespaceLabel: alpha},
		},
		"Cluster": {
			reason: "A cluster-scoped resource owns what carries its marker.",
			mg:     clWidget("web"),
			labels: map[string]string{OwnerLabel: "c_web"},
			want:   true,
		},
		"ClusterWithNamespace": {
			reason: "A cluster-scoped resource's marker under a namespace label is not the resource's.",
			mg:     clWidget("web"),
			labels: map[string]string{OwnerLabel: "c_web", NamespaceLabel: "team-a"},
		},
		"Unowned": {
			reason: "No marker, no owner.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{"team": "a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Owns(tc.mg, tc.labels); got != tc.want {
				t.Errorf("%s\nOwns(%s/%s, %v): want %t, got %t", tc.reason, tc.mg.GetNamespace(), tc.mg.GetName(), tc.labels, tc.want, got)
			}
		})
	}
}

func TestMigrates(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		labels map[string]string
		want   bool
	}{
		"Legacy": {
			reason: "The resource's own marker in the old format is rewritten.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-dde77bbf34", NamespaceLabel: alpha},
			want:   true,
		},
		"Current": {
			reason: "A current marker is left as it is.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", NamespaceLabel: alpha},
		},
		"Unchanged": {
			reason: "A marker that fits a label value is the same in both formats.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{OwnerLabel: "n_team-a.web"},
		},
		"Another": {
			reason: "Another namespace's legacy marker is not the resource's to rewrite.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-dde77bbf34", NamespaceLabel: alpha},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Migrates(tc.mg, tc.labels); got != tc.want {
				t.Errorf("%s\nMigrates(%s/%s, %v): want %t, got %t", tc.reason, tc.mg.GetNamespace(), tc.mg.GetName(), tc.labels, tc.want, got)
			}
		})
	}
}

// TestShortenedMarkersKeep128Bits checks that every shortened marker ends
// in 26 base32 characters (130 bits shown, 128 of them hash), whatever the
// lengths of namespace and name.
func TestShortenedMarkersKeep128Bits(t *testing.T) {
	for _, nsLen := range []int{1, 20, 33, 34, 49, 50, 55, 63} {
		for _, nameLen := range []int{1, 30, 63, 253} {
			ns := strings.Repeat("n", nsLen)
			mg := nsWidget(ns, strings.Repeat("m", nameLen))
			o := Marker(mg)
			if len("n_"+ns+"."+mg.GetName()) <= 63 {
				continue
			}
			i := strings.LastIndex(o, "-")
			if len(o) > 63 || i < 0 || len(o[i+1:]) != 26 || strings.Trim(o[i+1:], "abcdefghijklmnopqrstuvwxyz234567") != "" {
				t.Errorf("Marker(%d-character namespace, %d-character name) = %q: want at most 63 characters ending in '-' and 26 base32 characters", nsLen, nameLen, o)
			}
		}
	}
}

func TestReleased(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		want   string
	}{
		"Namespaced": {reason: "A namespaced resource reserves what it releases for its namespace.", mg: nsWidget("team-a", "web"), want: "team-a"},
		"Cluster":    {reason: "A cluster-scoped resource reserves what it releases for cluster-scoped resources.", mg: clWidget("web"), want: "_cluster-scoped"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReleasedBy(tc.mg); got != tc.want {
				t.Errorf("%s\nReleased(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

// TestReservedAgainst checks who may adopt a released widget (finding L4
// of issue 42): the namespace that released it, and the platform.
func TestReservedAgainst(t *testing.T) {
	byTeamA := map[string]string{"team": "a", ReleasedByLabel: "team-a"}
	byCluster := map[string]string{ReleasedByLabel: "_cluster-scoped"}
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		labels map[string]string
		want   bool
	}{
		"SameNamespace":    {reason: "The namespace that released a widget may adopt it.", mg: nsWidget("team-a", "web-2"), labels: byTeamA},
		"OtherNamespace":   {reason: "Another namespace may not.", mg: nsWidget("team-b", "web"), labels: byTeamA, want: true},
		"PrefixNamespace":  {reason: "A namespace that merely starts like the releaser's is another namespace.", mg: nsWidget("team", "web"), labels: byTeamA, want: true},
		"Platform":         {reason: "A cluster-scoped resource (the platform's) may adopt any released widget.", mg: clWidget("web"), labels: byTeamA},
		"ClusterReleased":  {reason: "No namespace may adopt what a cluster-scoped resource released.", mg: nsWidget("team-a", "web"), labels: byCluster, want: true},
		"ClusterByCluster": {reason: "A cluster-scoped resource may adopt what another released.", mg: clWidget("web-2"), labels: byCluster},
		"EmptyReservation": {reason: "An empty reservation reserves the widget for no namespace.", mg: nsWidget("team-a", "web"), labels: map[string]string{ReleasedByLabel: ""}, want: true},
		"NotReleased":      {reason: "An unowned widget that was never released is reserved for no one.", mg: nsWidget("team-b", "web"), labels: map[string]string{"team": "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReservedAgainst(tc.mg, tc.labels); got != tc.want {
				t.Errorf("%s\nReservedAgainst(%s/%s, %v): want %t, got %t", tc.reason, tc.mg.GetNamespace(), tc.mg.GetName(), tc.labels, tc.want, got)
			}
		})
	}
}

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
			want:   map[string]string{OwnerLabel: "n_team-xxxxxxxxxxxxxxxxxxxxxxxxxxxxx-ksujxcqnecjiryu6sqsiydkqme", NamespaceLabel: long50},
		},
		"SharedPrefixAlpha": {
			reason: "A shortened marker keeps 36 characters and 128 bits of a hash of namespace and name (26 base32 characters), and the whole namespace.",
			mg:     nsWidget(alpha, "web-frontend"),
			want:   map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", NamespaceLabel: alpha},
		},
		"SharedPrefixBravo": {
			reason: "A namespace that shares alpha's first 50 characters shares the marker's head, not its hash.",
			mg:     nsWidget(bravo, "web-frontend"),
			want:   map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-2wfpfaktjkgmkgbegjqgihpkoe", NamespaceLabel: bravo},
		},
		"LongClusterName": {
			reason: "A long cluster-scoped name is shortened the same way.",
			mg:     clWidget("a-very-long-cluster-scoped-widget-name-that-does-not-fit-anywhere"),
			want:   map[string]string{OwnerLabel: "c_a-very-long-cluster-scoped-widget-55hstk4lu6sccbyw32atveshrm"},
		},
		"LongNameOnly": {
			reason: "A long name is shortened after the namespace, which stays readable: one label.",
			mg:     nsWidget("team-a", strings.Repeat("n", 80)),
			want:   map[string]string{OwnerLabel: Marker(nsWidget("team-a", strings.Repeat("n", 80)))},
		},
		"Cluster": {
			reason: "A cluster-scoped resource has no namespace to record.",
			mg:     clWidget("web"),
			want:   map[string]string{OwnerLabel: "c_web"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Labels(tc.mg, "")); diff != "" {
				t.Errorf("%s\nMarkers(...): -want, +got:\n%s", tc.reason, diff)
			}
			for k, v := range Labels(tc.mg, "") {
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
		"Label":         {reason: "A marker shortened before its '.' names its namespace in the namespace label.", labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", NamespaceLabel: alpha}, want: alpha, wantOK: true},
		"SameInBoth":    {reason: "A namespace label that repeats what the marker spells out is the same namespace.", labels: map[string]string{OwnerLabel: "n_team-a.web", NamespaceLabel: "team-a"}, want: "team-a", wantOK: true},
		"Disagree":      {reason: "A namespace label that contradicts the marker is forged: neither is believed.", labels: map[string]string{OwnerLabel: "n_team-a.web", NamespaceLabel: "team-b"}},
		"ClusterLabel":  {reason: "A namespace label on a cluster-scoped marker names no namespace.", labels: map[string]string{OwnerLabel: "c_web", NamespaceLabel: "team-a"}},
		"Shortened":     {reason: "A marker shortened before its '.' cannot say.", labels: map[string]string{OwnerLabel: "n_team-" + strings.Repeat("x", 45) + "-0123456789"}},
		"Cluster":       {reason: "A cluster-scoped marker has no namespace.", labels: map[string]string{OwnerLabel: "c_web"}},
		"Foreign":       {reason: "A marker this provider did not write has no namespace.", labels: map[string]string{OwnerLabel: "terraform"}},
		"EmptyMarkerNS": {reason: "A marker with an empty namespace says nothing.", labels: map[string]string{OwnerLabel: "n_.web"}},
		"None":          {reason: "No labels, no owner.", labels: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Namespace(tc.labels)
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
		"LabelOnly":       {reason: "A long namespace is read from the namespace label.", mg: nsWidget(long50, "key"), labels: Labels(nsWidget(long50, "web-frontend-server"), ""), want: true},
		"LongOtherNS":     {reason: "A long namespace label naming another namespace is out of reach.", mg: nsWidget(long50+"y", "key"), labels: Labels(nsWidget(long50, "web-frontend-server"), "")},
		"CollidingMarker": {
			reason: "Finding M4: a name of bravo whose (40-bit) marker equals the one on alpha's widget does not reach it: the widget's namespace is alpha.",
			mg:     nsWidget(bravo, "probe-000001"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-b89f23b543", NamespaceLabel: alpha},
		},
		"ForgedNamespace": {
			reason: "A marker equal to the resource's own under a namespace label that names another namespace is not reached.",
			mg:     nsWidget("team-a", "key"),
			labels: map[string]string{OwnerLabel: "n_team-a.key", NamespaceLabel: "team-b"},
		},
		"SharedPrefixOther": {
			reason: "Alpha's widget is out of reach of a resource of bravo with the same name.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", NamespaceLabel: alpha},
		},
		"ClusterResource": {reason: "A cluster-scoped resource reaches anything its ProviderConfig reaches.", mg: clWidget("key"), labels: map[string]string{OwnerLabel: "n_team-b.web"}, want: true},
		"ClusterUnowned":  {reason: "A cluster-scoped resource reaches unowned widgets.", mg: clWidget("key"), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := InReach(tc.mg, tc.labels); got != tc.want {
				t.Errorf("%s\nReaches(%s/%s, %v): want %t, got %t", tc.reason, tc.mg.GetNamespace(), tc.mg.GetName(), tc.labels, tc.want, got)
			}
		})
	}
}
