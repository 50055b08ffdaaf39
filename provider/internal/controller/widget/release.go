package widget

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// ReasonReleased is the event of a Widget deleted without its widget (an
// orphan) that removed its ownership marker from the widget.
const ReasonReleased event.Reason = "ReleasedWidget"

// Release removes this resource's ownership markers from its widget when the
// resource is deleted and its policies keep the widget (see
// mrsetup.Releaser), and reserves the widget for the resource's scope (see
// ownership.ReleasedBy): the orphaned widget is then unowned, and a resource of
// the same namespace, or a cluster-scoped one, may adopt it (with an
// explicit external name). The reservation has no expiry: a team moving its
// widget to a new resource must not lose it to another namespace that polls
// for the release, however long the move takes; the platform team ends it by
// removing ownership.ReleasedByLabel.
func (c *connector[T]) Release(ctx context.Context, mg T) error {
	name := meta.GetExternalName(mg)
	if name == "" || !names.ValidWidgetName(name) {
		return nil
	}
	s, err := c.sessions.Open(ctx, mg, c.delay, c.feedKind, name)
	if err != nil {
		return err
	}
	return c.external(s).release(ctx, mg)
}

// release replaces mg's ownership markers on its widget with the
// reservation for mg's scope, and changes nothing else.
// A widget that is gone, being deleted, carries another owner's marker (or
// none), or is another control plane's is left alone: a resource releases only what it owns. The write
// is conditional on the generation it read, so a resource that adopts the
// widget between the read and the write is never stripped of its marker:
// the write fails, and the retry reads the new owner and leaves it.
func (e *external[T]) release(ctx context.Context, mg T) error {
	name := meta.GetExternalName(mg)
	w, err := e.api.GetWidget(ctx, name)
	if widgetapi.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrap(err, "cannot get widget")
	}
	if !ownership.Owns(mg, w.Labels) || w.State == widgetapi.StateDeleting {
		return nil
	}
	if _, ok := ownership.Elsewhere(w.Labels, e.cp); ok {
		// Another control plane's resource with the same marker (a
		// restore or migration) manages it: that one releases it.
		return nil
	}
	labels := ownership.Without(w.Labels)
	labels[ownership.ReleasedByLabel] = ownership.ReleasedBy(mg)
	_, err = e.api.ReplaceWidget(ctx, name, widgetapi.ReplaceWidgetRequest{
		Size:        w.Size,
		Labels:      labels,
		Description: w.Description,
	}, widgetapi.IfGeneration(w.Generation))
	if widgetapi.IsPreconditionFailed(err) {
		return errors.Errorf("widget %s changed while its ownership marker was being removed; reading it again", name)
	}
	if widgetapi.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrap(err, "cannot remove the ownership marker from widget")
	}
	e.record.Event(mg, event.Normal(ReasonReleased, "Left widget "+name+" in the Widget API and removed its ownership marker: "+scope(mg)+" may now adopt it (label "+ownership.ReleasedByLabel+" reserves it for them)"))
	return nil
}

// scope names, for people, the resources that may adopt a widget mg
// released (see ownership.ReservedAgainst).
func scope(mg resource.Managed) string {
	if ns := mg.GetNamespace(); ns != "" {
		return "resources of namespace " + ns + " and cluster-scoped resources"
	}
	return "cluster-scoped resources"
}
