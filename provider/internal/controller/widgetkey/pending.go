package widgetkey

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// indexController indexes WidgetKeys by the UID of their controller (the XR
// that composes them), so that a Widget that gets its external name finds
// the keys composed with it without reading every key.
const indexController = "widgetkey.controllerUID"

func controllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// keysWaitingFor maps a Widget to the WidgetKeys composed with it (by the
// same controller, in its namespace) whose widget name is not resolved yet:
// they wait for the Widget's external name (mrsetup.WithPendingReferences).
func keysWaitingFor(kube client.Reader, newList func() resource.ManagedList) handler.MapFunc {
	return func(ctx context.Context, w client.Object) []reconcile.Request {
		uid := controllerUID(w)
		if len(uid) == 0 || meta.GetExternalName(w) == "" {
			return nil
		}
		l := newList()
		opts := []client.ListOption{client.MatchingFields{indexController: uid[0]}}
		if ns := w.GetNamespace(); ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := kube.List(ctx, l, opts...); err != nil {
			// The keys' backoff requeues them anyway.
			return nil
		}
		var reqs []reconcile.Request
		for _, k := range l.GetItems() {
			if wk, ok := k.(commonv1beta1.WidgetKeyResource); ok && wk.GetWidgetName() == "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: k.GetNamespace(), Name: k.GetName()}})
			}
		}
		return reqs
	}
}

// named passes the events of a Widget that has just got its external name.
func named() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return meta.GetExternalName(e.Object) != "" },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return meta.GetExternalName(e.ObjectNew) != "" && meta.GetExternalName(e.ObjectOld) == ""
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
