//go:build linux

package e2e_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// narrowedForProvider are resources Crossplane's RBAC manager grants every
// provider (every verb, cluster-wide) that provider-widget uses with only
// these verbs: docs/rbac.md tells platforms they may narrow the grant to
// them, so the suite holds the provider to it. configmaps: the control
// plane's name, read (and made once) at start in the provider's namespace.
var narrowedForProvider = map[string][]string{"configmaps": {"get", "create"}}

// The user names of the packages' ServiceAccounts start with these:
// Crossplane names each after its package revision.
const (
	providerUser = "system:serviceaccount:" + cluster.CrossplaneNamespace + ":" + platform.ProviderName
	functionUser = "system:serviceaccount:" + cluster.CrossplaneNamespace + ":" + platform.FunctionName
)

// checkProviderRequests prints every kind of request provider-widget's
// ServiceAccounts made during the suite, read from kube-apiserver's audit log
// (the list docs/rbac.md is written from), and fails when any of them used a
// resource of narrowedForProvider beyond its verbs, or cluster-wide.
func checkProviderRequests() error {
	user := providerUser
	all, err := suite.c.Requests(user)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return errors.Errorf("kube-apiserver's audit log holds no request of a user named %s*: is that not the provider's ServiceAccount?", user)
	}
	lines := make([]string, 0, len(all))
	var bad []string
	for _, r := range all {
		lines = append(lines, strings.TrimPrefix(r.User, user)+": "+r.String())
		group, _, _ := strings.Cut(r.Resource, ".")
		resource, _, _ := strings.Cut(group, "/")
		if verbs, ok := narrowedForProvider[resource]; ok && (!slices.Contains(verbs, r.Verb) || !r.Namespaced) {
			bad = append(bad, r.String())
		}
	}
	fmt.Printf("E2E RBAC: requests of provider-widget's ServiceAccounts (%s*), by kind:\n  %s\n", user, strings.Join(lines, "\n  "))
	// function-widget is granted nothing (the RBAC manager renders roles
	// for providers only); shown for docs/rbac.md.
	fn := functionUser
	fnAll, err := suite.c.Requests(fn)
	if err != nil {
		return err
	}
	fnLines := make([]string, 0, len(fnAll))
	for _, r := range fnAll {
		fnLines = append(fnLines, strings.TrimPrefix(r.User, fn)+": "+r.String())
	}
	fmt.Printf("E2E RBAC: requests of function-widget's ServiceAccounts (%s*): %d kinds\n  %s\n", fn, len(fnAll), strings.Join(fnLines, "\n  "))
	if len(bad) > 0 {
		return errors.Errorf("provider-widget made requests beyond what docs/rbac.md says platforms may narrow its grant to (%v):\n  %s", narrowedForProvider, strings.Join(bad, "\n  "))
	}
	return nil
}
