// Package controller sets up every controller of provider-widget.
package controller

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/controller/config"
	"github.com/widgetco/crossplane-widget/provider/internal/controller/inventory"
	"github.com/widgetco/crossplane-widget/provider/internal/controller/widget"
	"github.com/widgetco/crossplane-widget/provider/internal/controller/widgetkey"
	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
)

// Setup adds every controller to mgr. With o.Gate set (safe-start), each
// managed resource controller starts only once its CRD is served, since
// Crossplane installs CRDs of a safe-start provider only when activated.
func Setup(mgr ctrl.Manager, o controller.Options, d mrsetup.Deps) error {
	if err := config.Setup(mgr, o); err != nil {
		return errors.Wrap(err, "cannot set up ProviderConfig controllers")
	}
	setups := []struct {
		gvk   schema.GroupVersionKind
		setup func() error
	}{
		{nsv1beta1.WidgetGroupVersionKind, func() error {
			return widget.Setup(mgr, o, d, nsv1beta1.WidgetGroupVersionKind,
				func() *nsv1beta1.Widget { return &nsv1beta1.Widget{} },
				func() resource.ManagedList { return &nsv1beta1.WidgetList{} })
		}},
		{clusterv1beta1.WidgetGroupVersionKind, func() error {
			return widget.Setup(mgr, o, d, clusterv1beta1.WidgetGroupVersionKind,
				func() *clusterv1beta1.Widget { return &clusterv1beta1.Widget{} },
				func() resource.ManagedList { return &clusterv1beta1.WidgetList{} })
		}},
		{nsv1beta1.WidgetKeyGroupVersionKind, func() error {
			return widgetkey.Setup(mgr, o, d, nsv1beta1.WidgetKeyGroupVersionKind,
				func() *nsv1beta1.WidgetKey { return &nsv1beta1.WidgetKey{} },
				func() resource.ManagedList { return &nsv1beta1.WidgetKeyList{} },
				func() client.Object { return &nsv1beta1.Widget{} })
		}},
		{clusterv1beta1.WidgetKeyGroupVersionKind, func() error {
			return widgetkey.Setup(mgr, o, d, clusterv1beta1.WidgetKeyGroupVersionKind,
				func() *clusterv1beta1.WidgetKey { return &clusterv1beta1.WidgetKey{} },
				func() resource.ManagedList { return &clusterv1beta1.WidgetKeyList{} },
				func() client.Object { return &clusterv1beta1.Widget{} })
		}},
		{nsv1beta1.WidgetInventoryGroupVersionKind, func() error { return inventory.Setup(mgr, o, d) }},
	}
	for _, s := range setups {
		if o.Gate == nil {
			if err := s.setup(); err != nil {
				return errors.Wrapf(err, "cannot set up %s controller", s.gvk.GroupKind())
			}
			continue
		}
		o.Gate.Register(func() {
			if err := s.setup(); err != nil {
				o.Logger.Info("Cannot set up controller", "gvk", s.gvk.String(), "error", err.Error())
			}
		}, s.gvk)
	}
	return nil
}
