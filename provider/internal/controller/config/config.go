// Package config reconciles the three ProviderConfig kinds: it counts their
// users (ProviderConfigUsages) and keeps a ProviderConfig in use from being
// deleted.
package config

import (
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	xpevent "github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/debounce"
	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
)

// Setup adds a controller for each ProviderConfig kind. A
// ClusterProviderConfig's users are namespaced ProviderConfigUsages (labelled
// with the config's kind), which is what crossplane-runtime's usage tracker
// creates for namespaced managed resources.
//
// It is crossplane-runtime's ProviderConfig reconciler as
// crossplane/provider-template sets it up, with three layers, each switched
// on here and nowhere else (docs/reconciler.md has what each saves and the
// contract test that pins what it assumes):
//
//  1. usageDebounce: usage watch events wait UsageDebounce and queue one
//     recount (stock: one recount per usage event).
//  2. unchangedRecount (unchanged.go): a recount's update or status update
//     equal to what it read is not sent.
//  3. copyFreeRecount (unchanged.go): the recount lists usages without
//     copying them out of the cache.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	for _, k := range []struct {
		name  string
		kind  string // of the ProviderConfig, as usages reference it
		kinds resource.ProviderConfigKinds
		pc    client.Object
		usage client.Object
	}{
		{
			name:  providerconfig.ControllerName(nsv1alpha1.ProviderConfigGroupKind),
			kind:  nsv1alpha1.ProviderConfigKind,
			kinds: resource.ProviderConfigKinds{Config: nsv1alpha1.ProviderConfigGroupVersionKind, Usage: nsv1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: nsv1alpha1.ProviderConfigUsageListGroupVersionKind},
			pc:    &nsv1alpha1.ProviderConfig{}, usage: &nsv1alpha1.ProviderConfigUsage{},
		},
		{
			name:  providerconfig.ControllerName(nsv1alpha1.ClusterProviderConfigGroupKind),
			kind:  nsv1alpha1.ClusterProviderConfigKind,
			kinds: resource.ProviderConfigKinds{Config: nsv1alpha1.ClusterProviderConfigGroupVersionKind, Usage: nsv1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: nsv1alpha1.ProviderConfigUsageListGroupVersionKind},
			pc:    &nsv1alpha1.ClusterProviderConfig{}, usage: &nsv1alpha1.ProviderConfigUsage{},
		},
		{
			name:  providerconfig.ControllerName(clusterv1alpha1.ProviderConfigGroupKind),
			kind:  clusterv1alpha1.ProviderConfigKind,
			kinds: resource.ProviderConfigKinds{Config: clusterv1alpha1.ProviderConfigGroupVersionKind, Usage: clusterv1alpha1.ProviderConfigUsageGroupVersionKind, UsageList: clusterv1alpha1.ProviderConfigUsageListGroupVersionKind},
			pc:    &clusterv1alpha1.ProviderConfig{}, usage: &clusterv1alpha1.ProviderConfigUsage{},
		},
	} {
		// Layers 2 and 3 (unchanged.go): recounts that change nothing
		// write nothing, and list usages without copies.
		r := providerconfig.NewReconciler(mrsetup.WithClient(mgr, newUnchangedSkipped(mgr.GetClient())), k.kinds,
			providerconfig.WithLogger(o.Logger.WithValues("controller", k.name)),
			providerconfig.WithRecorder(xpevent.NewAPIRecorder(mgr.GetEventRecorderFor(k.name))))
		err := ctrl.NewControllerManagedBy(mgr).
			Named(k.name).
			WithOptions(o.ForControllerRuntime()).
			For(k.pc).
			// Layer 1: usage events debounced.
			Watches(k.usage, debounce.Handler(&resource.EnqueueRequestForProviderConfig{Kind: k.kind}, UsageDebounce)).
			Complete(ratelimiter.NewReconciler(k.name, r, o.GlobalRateLimiter))
		if err != nil {
			return err
		}
	}
	return nil
}

// UsageDebounce is how long a ProviderConfig waits after a usage changes
// before it recounts its users. Creating N managed resources creates N
// usages; without the wait each one would cost a ProviderConfig reconcile
// (and a status write), taken from the same global reconcile budget that
// the managed resources need. With it, a burst costs one recount per
// UsageDebounce.
const UsageDebounce = time.Second
