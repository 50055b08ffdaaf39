package fn

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	corev1 "k8s.io/api/core/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// observedResources are the composed resources that exist, by composition
// resource name, as Crossplane sends them. A resource is converted only when
// the function reads it (get): the function never reads much of what a
// request holds, such as the connection Secret, of which only its existence
// matters, and the resources of other pipeline steps.
type observedResources map[string]*fnv1.Resource

// get returns the observed composed resource n, if it exists, as
// request.GetObservedComposedResources would return it.
func (o observedResources) get(n resource.Name) (resource.ObservedComposed, bool) {
	r, ok := o[string(n)]
	if !ok {
		return resource.ObservedComposed{}, false
	}
	ocd := resource.ObservedComposed{Resource: composed.New(), ConnectionDetails: r.GetConnectionDetails()}
	if ocd.ConnectionDetails == nil {
		ocd.ConnectionDetails = resource.ConnectionDetails{}
	}
	ocd.Resource.SetUnstructuredContent(r.GetResource().AsMap())
	return ocd, true
}

// has reports whether the composed resource n exists.
func (o observedResources) has(n resource.Name) bool {
	_, ok := o[string(n)]
	return ok
}

// An observation is what the function knows about the resources it composes.
type observation struct {
	widget widgetObservation

	// keys are the access keys the XR asks for, in order.
	keys []keyObservation

	// secretExists is whether a namespaced XR's connection Secret exists.
	secretExists bool
}

// A widgetObservation is the observed Widget managed resource.
type widgetObservation struct {
	exists       bool
	name         string
	externalName string
	deleting     bool
	ready        xpv2.Condition
	synced       xpv2.Condition
	atProvider   commonv1beta1.WidgetObservation
	// drift is the provider's record of the widget's drift repairs, or
	// nil.
	drift *commonv1beta1.DriftRepairs

	// region is the region the widget has or is being created in: once
	// set, it cannot change.
	region string
}

// A keyObservation is the observed WidgetKey managed resource of one access
// key.
type keyObservation struct {
	index    int
	exists   bool
	name     string
	deleting bool
	synced   xpv2.Condition

	// details are the key's connection details, which Crossplane reads from
	// the Secret the WidgetKey writes.
	details resource.ConnectionDetails
}

// observe reads the access keys and the connection Secret from the observed
// state, for an XR whose widget is w and that asks for the supplied number of
// keys, which must be checked against its bound already. It stops early once
// ctx is done, returning what it has read; the caller must then not use it.
func observe(ctx context.Context, w widgetObservation, o observedResources, keys int) observation {
	obs := observation{widget: w, keys: make([]keyObservation, keys)}
	for i := range obs.keys {
		if ctx.Err() != nil {
			return obs
		}
		obs.keys[i] = observeKey(ctx, o, i)
	}
	obs.secretExists = o.has(resourceConnectionSecret)
	return obs
}

// observeWidget reads the Widget from the observed state. It stops early
// once ctx is done, like readConditions.
func observeWidget(ctx context.Context, o observedResources) widgetObservation {
	ocd, ok := o.get(resourceWidget)
	if !ok {
		return widgetObservation{}
	}
	r := ocd.Resource
	cs := conditionsOf(ctx, r)
	w := widgetObservation{
		exists:       true,
		name:         r.GetName(),
		externalName: meta.GetExternalName(r),
		deleting:     r.GetDeletionTimestamp() != nil,
		ready:        cs.GetCondition(xpv2.TypeReady),
		synced:       cs.GetCondition(xpv2.TypeSynced),
	}
	// A status the function cannot read is treated as no status yet: the
	// widget is then not ready, and the next observation may succeed.
	_ = r.GetValueInto("status.atProvider", &w.atProvider)
	if d := (commonv1beta1.DriftRepairs{}); r.GetValueInto("status.drift", &d) == nil && d.Count > 0 {
		w.drift = &d
	}
	w.region, _ = r.GetString("spec.initProvider.region")
	if w.region == "" {
		// A Widget observed at v1alpha1, as one composed before the
		// upgrade to v1beta1 may be, has it in spec.forProvider.
		w.region, _ = r.GetString("spec.forProvider.region")
	}
	if w.region == "" {
		w.region = w.atProvider.Region
	}
	if !isRegion(w.region) {
		// Neither the Widget CRD nor the Widget API gives a widget such a
		// region, and the function would compose it into the Widget.
		w.region = ""
	}
	return w
}

func observeKey(ctx context.Context, o observedResources, i int) keyObservation {
	ocd, ok := o.get(keyResourceName(i))
	if !ok {
		return keyObservation{index: i}
	}
	return keyObservation{
		index:    i,
		exists:   true,
		name:     ocd.Resource.GetName(),
		deleting: ocd.Resource.GetDeletionTimestamp() != nil,
		synced:   conditionsOf(ctx, ocd.Resource).GetCondition(xpv2.TypeSynced),
		details:  ocd.ConnectionDetails,
	}
}

// conditionsOf reads a composed resource's conditions. Conditions that cannot
// be read count as unknown.
func conditionsOf(ctx context.Context, r *composed.Unstructured) *xpv2.ConditionedStatus {
	return &xpv2.ConditionedStatus{Conditions: readConditions(ctx, r.Object)}
}

// readConditions reads status.conditions of an object's unstructured
// content. It reads the fields straight from the content rather than through
// a JSON round trip (GetValueInto), which cost more than the rest of reading
// a WidgetKey. It reads what the function uses: type, status, reason, message
// and observedGeneration, not lastTransitionTime. A condition that is not an
// object, and a field of the wrong type, are skipped. The list is as long as
// the request makes it, so readConditions stops early once ctx is done,
// returning what it has read; the caller must then not use it.
func readConditions(ctx context.Context, o map[string]any) []xpv2.Condition {
	st, _ := o["status"].(map[string]any)
	l, _ := st["conditions"].([]any)
	if len(l) == 0 {
		return nil
	}
	cs := make([]xpv2.Condition, 0, len(l))
	for _, e := range l {
		if ctx.Err() != nil {
			return cs
		}
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		c := xpv2.Condition{}
		c.Type = xpv2.ConditionType(stringField(m, "type"))
		c.Status = corev1.ConditionStatus(stringField(m, "status"))
		c.Reason = xpv2.ConditionReason(stringField(m, "reason"))
		c.Message = stringField(m, "message")
		switch g := m["observedGeneration"].(type) {
		case int64:
			c.ObservedGeneration = g
		case int:
			c.ObservedGeneration = int64(g)
		case float64:
			c.ObservedGeneration = int64(g)
		}
		cs = append(cs, c)
	}
	return cs
}

func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// endpoint is the widget's endpoint, once it has one.
func (w widgetObservation) endpoint() string {
	return w.atProvider.Endpoint
}
