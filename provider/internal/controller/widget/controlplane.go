package widget

import (
	"context"
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Two control planes can hold a resource with the same owner marker for one
// widget: a restore into a new cluster while the old one still runs, or a
// migration that runs both for a while. The widget's control plane label
// (ownership.ControlPlaneLabel) says which of them manages it. The other
// one, the contender, never writes the widget's fields: it says on the
// widget that it is there (ownership.ContestLabels, at most every
// ownership.ContestRefresh), reports on its own resource how to take the
// widget over, and leaves it alone when its resource is deleted. The owner
// reports the contest on its resource while it is fresh. Nothing is fought
// out: a take-over happens only when a resource names the control plane it
// takes over from (ownership.TakeOverAnnotation).

// otherControlPlane decides for a widget that another control plane
// manages. When done, Observe returns err (nil: the widget does not exist
// for mg); otherwise Observe goes on: the widget is this control plane's,
// mg only observes it, or mg takes it over.
func (e *external[T]) otherControlPlane(ctx context.Context, mg T, w *widgetapi.Widget) (done bool, err error) {
	other, elsewhere := ownership.Elsewhere(w.Labels, e.cp)
	if !elsewhere {
		return false, nil
	}
	name := meta.GetExternalName(mg)
	switch {
	case meta.WasDeleted(mg):
		// Deleting this resource must neither delete nor release another
		// control plane's widget.
		e.record.Event(mg, event.Normal(ReasonLeftToControlPlane, fmt.Sprintf("Widget %s is managed by control plane %s: deleting this resource left it in the Widget API", name, other)))
		return true, nil
	case observeOnly(mg):
		mg.SetConditions(controlPlaneCondition(corev1.ConditionFalse, ReasonOtherControlPlane, fmt.Sprintf("Widget %s is managed by control plane %s (label %s), and this is control plane %s: this resource only observes it. Before switching it to full management, take it over: annotate this resource with %s=%s.", name, other, ownership.ControlPlaneLabel, e.cp, ownership.TakeOverAnnotation, other)))
		return false, nil
	case mg.GetAnnotations()[ownership.TakeOverAnnotation] == other:
		if at, recent := ownership.TakenOver(w.Labels, e.clock()); recent {
			return true, errors.Errorf("widget %s was taken over by control plane %s at %s, and a take-over within %s of the last one is refused, so that two control planes annotated to take over from each other cannot hand it back and forth: remove the %s annotation from the resource of one of them", name, other, at.UTC().Format("2006-01-02T15:04:05Z"), ownership.ContestTTL, ownership.TakeOverAnnotation)
		}
		e.takingOver = other
		return false, nil
	}
	return true, e.contend(ctx, mg, w, other)
}

// contend says on the widget that this control plane has a resource for it
// too, unless it said so within ownership.ContestRefresh, and returns the
// error that mg reports. The write changes only the contest's labels, and
// only the generation it read: an owner's concurrent update wins, and the
// next reconcile reads it.
func (e *external[T]) contend(ctx context.Context, mg T, w *widgetapi.Widget, other string) error {
	name := meta.GetExternalName(mg)
	mg.SetWidgetObservation(observation(w))
	now := e.clock()
	if !ownership.Said(w.Labels, e.cp, now) {
		_, err := e.api.ReplaceWidget(ctx, name, widgetapi.ReplaceWidgetRequest{
			Size:        w.Size,
			Labels:      ownership.With(w.Labels, ownership.ContestLabels(e.cp, now)),
			Description: w.Description,
		}, widgetapi.IfGeneration(w.Generation))
		if widgetapi.IsPreconditionFailed(err) {
			return errors.Errorf("widget %s changed while this control plane was telling control plane %s that it has a resource for it; reading it again", name, other)
		}
		if err != nil {
			return errors.Wrap(err, "cannot tell the widget's control plane that this one has a resource for it")
		}
	}
	return errors.Errorf("widget %s is managed by control plane %s (label %s=%s), and this is control plane %s: this resource leaves the widget alone, and control plane %s reports it (label %s). If control plane %s is gone or is being replaced by this one, take the widget over: annotate this resource with %s=%s. Otherwise delete this resource (the widget stays), or make it Observe-only", name, other, ownership.ControlPlaneLabel, other, e.cp, other, ownership.ContenderLabel, other, ownership.TakeOverAnnotation, other)
}

// reportContest reports on the owner's resource a contest said within
// ownership.ContestTTL: another control plane has a resource for the widget
// and leaves it to this one. A contest that ended (stale, or a take-over
// removed it) turns the condition back. A resource that only observes, or
// takes the widget over now, is no owner yet.
func (e *external[T]) reportContest(mg T, w *widgetapi.Widget) {
	if e.takingOver != "" || observeOnly(mg) {
		return
	}
	name := meta.GetExternalName(mg)
	c, ok := ownership.ContestOf(w.Labels, e.cp, e.clock())
	switch {
	case ok:
		msg := fmt.Sprintf("Control plane %s has a resource for widget %s too, and leaves it to this one (label %s, said within the last %s). If that control plane replaces this one, take the widget over there; otherwise delete its resource (the widget stays).", c.By, name, ownership.ContenderLabel, ownership.ContestTTL)
		if mg.GetCondition(TypeControlPlane).Reason != ReasonContested {
			e.record.Event(mg, event.Warning(event.Reason(ReasonContested), errors.New(msg)))
		}
		mg.SetConditions(controlPlaneCondition(corev1.ConditionFalse, ReasonContested, msg))
	case mg.GetCondition(TypeControlPlane).Status != corev1.ConditionUnknown:
		mg.SetConditions(controlPlaneCondition(corev1.ConditionTrue, ReasonSoleControlPlane, fmt.Sprintf("No other control plane has said within the last %s that it has a resource for widget %s.", ownership.ContestTTL, name)))
	}
}

// clock tells the time that contests and take-overs are dated by.
func (e *external[T]) clock() time.Time {
	if e.now == nil {
		return time.Now()
	}
	return e.now()
}

// controlPlaneCondition is the ControlPlane condition.
func controlPlaneCondition(s corev1.ConditionStatus, r xpv2.ConditionReason, msg string) xpv2.Condition {
	return xpv2.Condition{
		Type:               TypeControlPlane,
		Status:             s,
		Reason:             r,
		Message:            msg,
		LastTransitionTime: metav1.Now(),
	}
}
