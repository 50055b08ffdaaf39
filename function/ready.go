package main

import (
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// isReady reports whether the widget is usable: the provider reports its
// Ready condition True only while the Widget API says the widget is Ready.
func (w widgetObservation) isReady() bool {
	return w.exists && !w.deleting && w.ready.Status == corev1.ConditionTrue
}

// canHoldKeys reports whether the widget's access keys can be composed: the
// Widget API has given the widget its ID (the Widget's external name) and the
// provider's last reconcile of it succeeded. Keys are created while the widget
// is still provisioning, which the Widget API allows, rather than one core
// reconcile after it is ready: a WidgetKey then resolves its widget at once,
// and the XR is ready as soon as both are. A Widget the provider refused (a
// tenancy conflict, say) is not Synced, and a widget that failed or is being
// deleted in the Widget API would refuse new keys, so none is composed for
// them.
func (w widgetObservation) canHoldKeys() bool {
	switch w.atProvider.State {
	case commonv1beta1.WidgetStateFailed, commonv1beta1.WidgetStateDeleting:
		return false
	}
	return w.exists && !w.deleting && w.externalName != "" && w.synced.Status == corev1.ConditionTrue
}

// isReady reports whether the access key is usable: its connection details
// hold the key.
func (k keyObservation) isReady() bool {
	return k.exists && !k.deleting && len(k.details[keyDetailKey]) > 0
}

// readyKeys counts the access keys that are ready.
func (o observation) readyKeys() int {
	n := 0
	for _, k := range o.keys {
		if k.isReady() {
			n++
		}
	}
	return n
}

// keysReady reports whether every access key the XR asks for is ready.
func (o observation) keysReady() bool {
	return o.readyKeys() == len(o.keys)
}

// isReady reports whether an XR of flavour f is ready: its widget and every
// access key it asks for are ready and, for a namespaced XR, its connection
// Secret exists.
func (o observation) isReady(f Flavour) bool {
	return o.widget.isReady() && o.keysReady() && (f != FlavourNamespaced || o.secretExists)
}

// asReady converts a readiness to the function SDK's.
func asReady(ready bool) resource.Ready {
	if ready {
		return resource.ReadyTrue
	}
	return resource.ReadyFalse
}

// ttlFor is how long Crossplane may cache a response: short while the XR
// converges, so that Crossplane calls the function again soon, long once it
// is ready.
func ttlFor(pol policy, ready bool) *durationpb.Duration {
	if ready {
		return durationpb.New(pol.readyTTL)
	}
	return durationpb.New(pol.convergingTTL)
}
