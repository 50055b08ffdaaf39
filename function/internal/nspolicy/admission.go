package nspolicy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// Admission of new XRs to their namespace's quotas
// (docs/policy.md#the-quota-race).
//
// Crossplane reconciles the XRs of a namespace independently, so the calls
// for XRs created together each count the namespace before any of their
// Widgets exists; counting Widgets alone admitted every one of them. So a
// call for a new XR (one that has composed nothing) also reads the
// namespace's XRs of its own kind. Those that have no Widget and are not
// being deleted queue for the namespace's quotas, ordered by creation time,
// then UID: every call orders them the same way. The XR reserves a place for
// each one ordered before it, and is admitted only if it fits after them.
//
// Core lists the XRs from its informer cache, so a call may not see XRs
// created just before it. An XR created in an earlier second than the XR is
// always seen; one created in the same second with a smaller UID may not be.
// So the XR is admitted only by a call whose view holds a write to an XR of
// its kind made in a later second than the XR's creation (completeView):
// the cache processes the writes of one kind in order, so it then holds
// every XR created in that second. Until then the XR waits, composing
// nothing (ReasonAdmissionPending). A call that finds it does not fit
// refuses it at once: XRs the view misses can only take places before it.

const (
	// ReasonAdmissionPending reports a new XR that fits its namespace's
	// quotas but waits until every XR created in the same second is
	// counted. It composes nothing until then.
	ReasonAdmissionPending = "AdmissionPending"

	// PendingTTL is how soon Crossplane calls the function again for a
	// waiting XR: the wait ends one second after its creation second.
	PendingTTL = time.Second
)

// A queued XR is an XR of the namespace, of the XR's own kind, that is not
// being deleted.
type queued struct {
	name string
	// owner is who the app team knows it as: the claim's name, or the
	// XR's.
	owner   string
	uid     string
	created time.Time
	// size and keys are what it asks for, with the defaults of the
	// calling XR's policy.
	size string
	keys int
}

// before orders XRs by creation time, then UID.
func (q queued) before(o queued) bool { return compareQueued(q, o) < 0 }

func compareQueued(a, b queued) int {
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	return cmp.Compare(a.uid, b.uid)
}

// A queue is what a call for a new XR read of the XRs of its kind in its
// namespace.
type queue struct {
	// read is whether the call received them.
	read bool
	xrs  []queued
	// horizon is the latest write the view shows of an XR of the kind: a
	// creation or a condition's transition, in seconds.
	horizon time.Time
}

// queueSelector selects the XRs of x's kind in namespace ns: a namespaced
// XR's namespace, or the claims' namespace of a legacy XR.
func queueSelector(req *fnv1.RunFunctionRequest, x XR, ns string) *fnv1.ResourceSelector {
	apiVersion := req.GetObserved().GetComposite().GetResource().GetFields()["apiVersion"].GetStringValue()
	s := &fnv1.ResourceSelector{ApiVersion: apiVersion, Kind: x.Kind}
	if !x.Legacy {
		s.Namespace = &ns
		return s
	}
	s.Match = &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{labelClaimNamespace: ns}}}
	return s
}

// readQueue reads the XRs Crossplane sent for reqQueue. What each asks for
// is read with the calling XR's policy's defaults, and bounded as the
// calling XR's own spec is.
func readQueue(rs []resource.Required, pol Composition) queue {
	q := queue{read: true, xrs: make([]queued, 0, len(rs))}
	for _, r := range rs {
		u := r.Resource
		q.horizon = latest(q.horizon, u.Object)
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		e := queued{name: u.GetName(), owner: u.GetLabels()[labelClaimName], uid: string(u.GetUID()), created: u.GetCreationTimestamp().Time, size: pol.DefaultSize, keys: pol.DefaultKeys}
		if e.owner == "" {
			e.owner = e.name
		}
		spec, _ := u.Object["spec"].(map[string]any)
		if sz, ok := spec["size"].(string); ok && sz != "" {
			e.size = sz
		}
		switch k := spec["keys"].(type) {
		case int64:
			e.keys = int(min(max(k, 0), int64(v1beta1.MaxKeys)))
		case float64:
			e.keys = int(min(max(k, 0), float64(v1beta1.MaxKeys)))
		}
		q.xrs = append(q.xrs, e)
	}
	return q
}

// latest returns the later of t and the latest write obj shows: its
// creation and its conditions' transitions.
func latest(t time.Time, obj map[string]any) time.Time {
	md, _ := obj["metadata"].(map[string]any)
	if s, ok := md["creationTimestamp"].(string); ok {
		if c, err := time.Parse(time.RFC3339, s); err == nil && c.After(t) {
			t = c
		}
	}
	st, _ := obj["status"].(map[string]any)
	cs, _ := st["conditions"].([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		s, _ := m["lastTransitionTime"].(string)
		if at, err := time.Parse(time.RFC3339, s); err == nil && at.After(t) {
			t = at
		}
	}
	return t
}

// self is the XR as its queue knows it: its name, UID and creation time,
// read from the observed XR.
func self(req *fnv1.RunFunctionRequest, want Spec) queued {
	md := req.GetObserved().GetComposite().GetResource().GetFields()["metadata"].GetStructValue().GetFields()
	q := queued{name: md["name"].GetStringValue(), uid: md["uid"].GetStringValue(), size: want.Size, keys: want.Keys}
	if c, err := time.Parse(time.RFC3339, md["creationTimestamp"].GetStringValue()); err == nil {
		q.created = c
	}
	return q
}

// observedHorizon is the latest write the observed XR shows. Core reads the
// XR from the same informer cache it lists XRs of the kind from, before it
// lists them.
func observedHorizon(req *fnv1.RunFunctionRequest) time.Time {
	xr := req.GetObserved().GetComposite().GetResource()
	if xr == nil {
		return time.Time{}
	}
	return latest(time.Time{}, (&structpb.Struct{Fields: xr.GetFields()}).AsMap())
}

// ahead returns the XRs of the queue ordered before me that have no Widget
// among widgets (of my flavour, legacy or not), oldest first. An XR whose
// size or key count the namespace's limits refuse holds no place: its own
// calls refuse it before its quota is counted, so it composes nothing until
// it changes.
func (q queue) ahead(me queued, widgets []counted, legacy bool, l namespaceLimits) []queued {
	holders := map[string]bool{}
	for _, w := range widgets {
		if w.legacy == legacy && w.composite != "" {
			holders[w.composite] = true
		}
	}
	out := []queued{}
	for _, e := range q.xrs {
		if e.name == me.name || holders[e.name] || !e.before(me) || l.refuses(e) {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, compareQueued)
	return out
}

// refuses reports whether the limits refuse what a queued XR asks for: a
// size they do not allow, or more keys per widget than they allow.
func (l namespaceLimits) refuses(e queued) bool {
	return !l.sizes.allows(e.size) || (l.maxKeys.max >= 0 && e.keys > l.maxKeys.max)
}

// completeView reports whether a call's view of the XRs of my kind holds
// every XR that can be ordered before me: it shows a write made in a later
// second than my creation. An XR without a creation time is not one the API
// server stored (crossplane render): nothing races it.
func completeView(me queued, horizon time.Time) bool {
	return me.created.IsZero() || horizon.Unix() > me.created.Unix()
}

// pendingCondition is the PolicyCompliant condition of an XR that waits for
// its place in its namespace's quotas. Its message changes once the second
// the XR was created in has passed, so that Crossplane writes it after that
// second: that write completes a later call's view (completeView).
func pendingCondition(x XR, ns string, me queued, now time.Time) Condition {
	msg := fmt.Sprintf("%s waits for its place in the quotas of namespace %s: XWidgets and claims created in the same second are counted first. Nothing is composed until then.", x.Owner, ns)
	if now.Unix() > me.created.Unix() {
		msg = fmt.Sprintf("%s waits for its place in the quotas of namespace %s: Crossplane is counting the XWidgets and claims created in the same second. Nothing is composed until then.", x.Owner, ns)
	}
	return Condition{Type: typePolicyCompliant, Status: corev1.ConditionUnknown, Reason: ReasonAdmissionPending, Message: msg}
}

// names lists the owners of queued XRs in a message, at most maxOwnersShown.
func names(qs []queued) string {
	ns := make([]string, 0, min(len(qs), maxOwnersShown))
	for _, q := range qs[:min(len(qs), maxOwnersShown)] {
		ns = append(ns, q.owner)
	}
	s := strings.Join(ns, ", ")
	if n := len(qs) - maxOwnersShown; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
