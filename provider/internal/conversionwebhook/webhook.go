// Package conversionwebhook serves the conversion webhook of the provider's
// CRDs: kube-apiserver calls it to convert Widgets and WidgetKeys between
// v1alpha1 and v1beta1 (the hub and storage version). The conversions
// themselves are the API types' (package apis), so this package only
// registers them with controller-runtime's webhook server.
package conversionwebhook

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// Setup registers the hub of every kind with more than one version, so that
// the manager's webhook server answers conversion requests for them at
// /convert.
func Setup(mgr manager.Manager) error {
	for _, hub := range []conversion.Hub{&namespacedv1beta1.Widget{}, &namespacedv1beta1.WidgetKey{}, &clusterv1beta1.Widget{}, &clusterv1beta1.WidgetKey{}} {
		if err := ctrl.NewWebhookManagedBy(mgr, hub).Complete(); err != nil {
			return fmt.Errorf("cannot set up the conversion webhook for %T: %w", hub, err)
		}
	}
	return nil
}
