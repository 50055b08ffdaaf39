package names

import (
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func nsWidget(ns, name string) resource.Managed {
	return &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func clWidget(name string) resource.Managed {
	return &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestDefault(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		want   string
	}{
		"Namespaced":      {"namespace and name are joined, with a hash of both", nsWidget("team-a", "web"), "team-a-web-a6d68893"},
		"Cluster":         {"cluster-scoped resources use their name as is", clWidget("web"), "web"},
		"Dots":            {"dots become dashes, and a hash keeps web.prod apart from web-prod", clWidget("web.prod"), "web-prod-558e18b6"},
		"Long":            {"long names are cut, keeping the hash", nsWidget("team", long), "team-" + strings.Repeat("a", 49) + "-2f7cd784"},
		"TrailingDashes":  {"names never end with a dash", clWidget("web-"), "web-9161755a"},
		"LongClusterName": {"long cluster names are cut and hashed", clWidget(long), strings.Repeat("a", 52) + "-" + "hash"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Default(tc.mg)
			if !ValidWidgetName(got) {
				t.Errorf("%s: Default() = %q is not a valid widget name", tc.reason, got)
			}
			if strings.HasSuffix(tc.want, "-hash") {
				if !strings.HasPrefix(got, strings.TrimSuffix(tc.want, "hash")) || len(got) != 63 {
					t.Errorf("%s: Default() = %q, want the cut name and a hash, 63 characters", tc.reason, got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
