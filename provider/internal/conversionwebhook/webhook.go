// Package conversionwebhook serves the conversion webhook of the provider's
// CRDs: kube-apiserver calls it to convert Widgets and WidgetKeys between
// v1alpha1 and v1beta1 (the hub and storage version). The conversions
// themselves are the API types' (package apis); this package registers them
// with controller-runtime's conversion handler, bounds what one request may
// cost (Limit), and serves them with a server that bounds connections and
// read times (NewServer).
package conversionwebhook

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	webhookconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// An Option configures Setup.
type Option func(*options)

type options struct {
	limits Limits
}

// WithLimits bounds each conversion request by l instead of DefaultLimits;
// zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(o *options) { o.limits = l }
}

// Setup serves conversion requests for every kind with more than one version
// at /convert of the manager's webhook server, each request bounded by
// DefaultLimits (or WithLimits).
func Setup(mgr manager.Manager, opts ...Option) error {
	o := options{limits: DefaultLimits}
	for _, fn := range opts {
		fn(&o)
	}
	// controller-runtime's builder registers its own, unbounded, handler at
	// /convert unless one is there already.
	mgr.GetWebhookServer().Register("/convert", Limit(webhookconversion.NewWebhookHandler(mgr.GetScheme(), mgr.GetConverterRegistry()), o.limits))
	for _, hub := range []conversion.Hub{&namespacedv1beta1.Widget{}, &namespacedv1beta1.WidgetKey{}, &clusterv1beta1.Widget{}, &clusterv1beta1.WidgetKey{}} {
		if err := ctrl.NewWebhookManagedBy(mgr, hub).Complete(); err != nil {
			return fmt.Errorf("cannot set up the conversion webhook for %T: %w", hub, err)
		}
	}
	return nil
}
