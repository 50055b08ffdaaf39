package fn

import (
	"time"

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

// canHoldKeys reports whether the widget's access keys can be created now:
// the Widget has its ID (its external name) and the provider's last
// reconcile of it succeeded. Until then a composed WidgetKey waits for its
// widget (keysCondition says so).
func (w widgetObservation) canHoldKeys() bool {
	return !w.refusesKeys() && w.exists && w.externalName != "" && w.synced.Status == corev1.ConditionTrue
}

// refusesKeys reports whether no new access key may be composed for the
// widget: one that failed or is being deleted in the Widget API would refuse
// it, a Widget being deleted is created again first, and a Widget the
// provider refused (a tenancy conflict, say) is not Synced. Any other widget
// takes new keys, even one not created yet: its WidgetKeys are composed with
// it, in the XR's first composition, as function-patch-and-transform
// composes them, and the provider has each wait quietly for its widget's ID
// (provider/internal/mrsetup/pending.go). Composing them only once the
// widget had its ID cost a round of compositions per XR, and the median key
// about twice the peer's time to Ready
// (notes/convergence-log.md#400-claims-beside-the-peer-and-the-5-minute-window).
func (w widgetObservation) refusesKeys() bool {
	switch w.atProvider.State {
	case commonv1beta1.WidgetStateFailed, commonv1beta1.WidgetStateDeleting:
		return true
	case commonv1beta1.WidgetStateProvisioning, commonv1beta1.WidgetStateReady, commonv1beta1.WidgetStateResizing:
		// A live widget, or one on its way, takes keys unless the
		// provider refused it (below).
	}
	return w.exists && (w.deleting || w.synced.Status == corev1.ConditionFalse)
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

// creatingTTL is the TTL of a response that composes a resource Crossplane
// did not observe. Crossplane core (v2.4.2) starts to route a composed
// resource's watch events to its XR only at the end of the reconcile that
// applied it, after the XR's status, and reads composed resources from its
// cache: a WidgetKey that the provider creates, publishes and marks Available
// before then wakes no reconcile, and the next one may not yet see it, so
// with the converging TTL the XR waited a minute for it. See
// docs/convergence.md#a-new-composed-resource-and-the-5-s-ttl.
const creatingTTL = 5 * time.Second

// ttlFor is how long Crossplane may cache a response: long once the XR is
// ready; while it converges, short enough that Crossplane calls the function
// again soon, and shorter still while it composes a resource that Crossplane
// has not observed yet (creating), whose changes may not wake the XR.
func ttlFor(pol policy, ready, creating bool) *durationpb.Duration {
	switch {
	case ready:
		return durationpb.New(pol.readyTTL)
	case creating && creatingTTL < pol.convergingTTL:
		return durationpb.New(creatingTTL)
	}
	return durationpb.New(pol.convergingTTL)
}

// creates reports whether the outcome composes a resource that is not among
// the observed ones: one that this composition creates, or that Crossplane's
// cache does not hold yet.
func (o *outcome) creates(observed observedResources) bool {
	for n := range o.composed {
		if !observed.has(n) {
			return true
		}
	}
	return false
}
