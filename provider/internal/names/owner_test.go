package names

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

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
			if got := DescribeOwner(tc.marker); got != tc.want {
				t.Errorf("%s\nDescribeOwner(%q): want %q, got %q", tc.reason, tc.marker, tc.want, got)
			}
		})
	}
}

// TestNamesFit checks that names and markers the provider derives from any
// resource stay valid and distinct.
func TestNamesFit(t *testing.T) {
	long := strings.Repeat("x", 250)
	cases := map[string]struct {
		reason string
		a, b   resource.Managed
	}{
		"NothingUsable": {
			reason: "A resource name with no character a widget name may hold still yields a valid, distinct name.",
			a:      clWidget("..."), b: clWidget(".."),
		},
		"LongNames": {
			reason: "Resources with long names that differ only at the end get distinct names and markers that fit a label value.",
			a:      nsWidget("team-a", long+"1"), b: nsWidget("team-a", long+"2"),
		},
		"DashesAtTheCut": {
			reason: "A name cut where it has dashes does not end in a dash.",
			a:      nsWidget("team", strings.Repeat("a", 50)+strings.Repeat("-", 20)+"b"), b: nsWidget("team", "b"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			da, db := Default(tc.a), Default(tc.b)
			for _, n := range []string{da, db} {
				if !ValidWidgetName(n) {
					t.Errorf("%s\nDefault(...) = %q is not a valid widget name", tc.reason, n)
				}
			}
			if da == db {
				t.Errorf("%s\nDefault(...): both resources map to %q", tc.reason, da)
			}
			oa, ob := Owner(tc.a), Owner(tc.b)
			if len(oa) > 63 || len(ob) > 63 || oa == ob {
				t.Errorf("%s\nOwner(...) = %q and %q: want distinct markers of at most 63 characters", tc.reason, oa, ob)
			}
		})
	}
}

// TestDefaultAvoidsCollisions checks that different namespaced resources get
// different default external names, so that one never meets the other's
// widget (the ownership marker would then block it with an error).
func TestDefaultAvoidsCollisions(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   resource.Managed
	}{
		"DashInNamespaceOrName": {
			reason: "A dash may belong to the namespace or to the name.",
			a:      nsWidget("team", "a-web"), b: nsWidget("team-a", "web"),
		},
		"ClusterNameLikeNamespaced": {
			reason: "A cluster-scoped name that spells a namespaced default is still distinct.",
			a:      clWidget("team-a-web"), b: nsWidget("team-a", "web"),
		},
		"DotOrDash": {
			reason: "A dot and a dash in a cluster-scoped name are told apart.",
			a:      clWidget("web.prod"), b: clWidget("web-prod"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if da, db := Default(tc.a), Default(tc.b); da == db {
				t.Errorf("%s\nDefault(...): %s/%s and %s/%s both map to %q", tc.reason,
					tc.a.GetNamespace(), tc.a.GetName(), tc.b.GetNamespace(), tc.b.GetName(), da)
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
			labels: map[string]string{OwnerLabel: alphaWeb, OwnerNamespaceLabel: alpha},
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
			labels: map[string]string{OwnerLabel: alphaWebLegacy, OwnerNamespaceLabel: alpha},
			want:   true,
		},
		"SharedPrefix": {
			reason: "A resource of the same name in a namespace that shares alpha's first 50 characters does not own alpha's widget.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{OwnerLabel: alphaWeb, OwnerNamespaceLabel: alpha},
		},
		"CollidingLegacyMarker": {
			reason: "A name of bravo whose 40-bit legacy marker equals the one on alpha's widget does not own it: the namespace differs.",
			mg:     nsWidget(bravo, "probe-000001"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-b89f23b543", OwnerNamespaceLabel: alpha},
		},
		"ForgedNamespace": {
			reason: "The resource's own marker under another namespace's label is not the resource's.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{OwnerLabel: "n_team-a.web", OwnerNamespaceLabel: "team-b"},
		},
		"ForgedLongNamespace": {
			reason: "The resource's own shortened marker without its namespace label is not the resource's.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: alphaWeb},
		},
		"AnotherLegacy": {
			reason: "Another resource's legacy marker in the same namespace stays another's.",
			mg:     nsWidget(alpha, "other"),
			labels: map[string]string{OwnerLabel: alphaWebLegacy, OwnerNamespaceLabel: alpha},
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
			labels: map[string]string{OwnerLabel: "c_web", OwnerNamespaceLabel: "team-a"},
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
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-dde77bbf34", OwnerNamespaceLabel: alpha},
			want:   true,
		},
		"Current": {
			reason: "A current marker is left as it is.",
			mg:     nsWidget(alpha, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-producti-3xtxxpzum324b3gt5cqlulblli", OwnerNamespaceLabel: alpha},
		},
		"Unchanged": {
			reason: "A marker that fits a label value is the same in both formats.",
			mg:     nsWidget("team-a", "web"),
			labels: map[string]string{OwnerLabel: "n_team-a.web"},
		},
		"Another": {
			reason: "Another namespace's legacy marker is not the resource's to rewrite.",
			mg:     nsWidget(bravo, "web-frontend"),
			labels: map[string]string{OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-dde77bbf34", OwnerNamespaceLabel: alpha},
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
			o := Owner(mg)
			if len("n_"+ns+"."+mg.GetName()) <= 63 {
				continue
			}
			i := strings.LastIndex(o, "-")
			if len(o) > 63 || i < 0 || len(o[i+1:]) != 26 || strings.Trim(o[i+1:], "abcdefghijklmnopqrstuvwxyz234567") != "" {
				t.Errorf("Owner(%d-character namespace, %d-character name) = %q: want at most 63 characters ending in '-' and 26 base32 characters", nsLen, nameLen, o)
			}
		}
	}
}
