package names

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

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
			if got := Released(tc.mg); got != tc.want {
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
