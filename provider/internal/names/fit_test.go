package names

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

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
