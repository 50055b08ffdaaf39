// Package widget reconciles Widget managed resources of both scopes
// (widget.m.widgetco.io and widget.widgetco.io) with widgets in the Widget
// API. One generic implementation serves both scopes.
package widget

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// API is the part of the Widget API client the controller uses.
type API interface {
	GetWidget(ctx context.Context, name string) (*widgetapi.Widget, error)
	CreateWidget(ctx context.Context, req widgetapi.CreateWidgetRequest) (*widgetapi.Widget, error)
	ReplaceWidget(ctx context.Context, name string, req widgetapi.ReplaceWidgetRequest, opts ...widgetapi.RequestOption) (*widgetapi.Widget, error)
	DeleteWidget(ctx context.Context, name string, opts ...widgetapi.RequestOption) (*widgetapi.Widget, error)
}

// Reasons of events and conditions.
const (
	ReasonDriftRepaired event.Reason         = "DriftRepaired"
	ReasonUpdated       event.Reason         = "UpdatedWidget"
	ReasonAdopted       event.Reason         = "AdoptedWidget"
	ReasonResizing      xpv2.ConditionReason = "Resizing"
)

// TypeControlPlane is the condition of a Widget whose widget another control
// plane has a say in: one that manages it (this resource only observes
// it), or one that has a resource for it too and leaves it to this one.
// Widgets of one control plane alone never carry it.
const TypeControlPlane xpv2.ConditionType = "ControlPlane"

// Reasons of the ControlPlane condition and of events about other control
// planes.
const (
	ReasonOtherControlPlane xpv2.ConditionReason = "OtherControlPlane"
	ReasonContested         xpv2.ConditionReason = "Contested"
	ReasonSoleControlPlane  xpv2.ConditionReason = "SoleControlPlane"

	ReasonLeftToControlPlane event.Reason = "LeftToOtherControlPlane"
	ReasonTookOver           event.Reason = "TookOverWidget"
)

// TypeUpToDate is the import review condition (see commonv1beta1, where its
// reasons are a contract with composition functions).
const TypeUpToDate = commonv1beta1.TypeUpToDate

// Reasons of the UpToDate condition.
const (
	ReasonWouldChange      = commonv1beta1.ReasonWouldChange
	ReasonNoDifference     = commonv1beta1.ReasonNoDifference
	ReasonManaged          = commonv1beta1.ReasonManaged
	ReasonNotFound         = commonv1beta1.ReasonNotFound
	ReasonOutOfReach       = commonv1beta1.ReasonOutOfReach
	ReasonManagedByAnother = commonv1beta1.ReasonManagedByAnother
	ReasonReserved         = commonv1beta1.ReasonReserved
)

// connector connects a Widget of scope T to the Widget API.
type connector[T commonv1beta1.WidgetResource] struct {
	sessions *clients.Sessions
	delay    clients.Delayer
	record   event.Recorder
	metrics  *metrics.Metrics
	kind     string
	feedKind string
	// cp is this provider's control plane (ownership.ControlPlaneLabel);
	// empty when it names none.
	cp  string
	now func() time.Time
}

// Connect resolves the ProviderConfig and returns a client for one reconcile.
func (c *connector[T]) Connect(ctx context.Context, mg T) (managed.TypedExternalClient[T], error) {
	s, err := c.sessions.Open(ctx, mg, c.delay, c.feedKind, meta.GetExternalName(mg))
	if err != nil {
		return nil, err
	}
	return c.external(s), nil
}

// external returns the client of one reconcile, over api.
func (c *connector[T]) external(api API) *external[T] {
	return &external[T]{api: api, record: c.record, metrics: c.metrics, kind: c.kind, cp: c.cp, now: c.now}
}

// external manages one Widget's widget. Its API is a clients.Session, which
// handles rate limiting and change feed bookkeeping for every call.
type external[T commonv1beta1.WidgetResource] struct {
	api     API
	record  event.Recorder
	metrics *metrics.Metrics
	kind    string
	cp      string
	now     func() time.Time

	// adopting is set by Observe when the widget is not yet marked as ours
	// and not one we managed before, so Update reports an adoption.
	adopting bool
	// migrating is set by Observe when the widget carries our ownership
	// marker in an older format, or no control plane yet, which Update
	// rewrites.
	migrating bool
	// takingOver is set by Observe to the control plane that the widget is
	// taken over from (ownership.TakeOverAnnotation), so Update says so.
	takingOver string
}

// Observe reads the widget, takes ownership decisions, late-initializes the
// spec, reports status and conditions, and compares what the user specified
// with what the API reports.
func (e *external[T]) Observe(ctx context.Context, mg T) (managed.ExternalObservation, error) {
	name := meta.GetExternalName(mg)
	if name == "" {
		return managed.ExternalObservation{}, nil
	}
	if !names.ValidWidgetName(name) {
		return managed.ExternalObservation{}, errors.Errorf("external name %q is not a valid widget name: use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
	if neverCreated(mg) {
		return managed.ExternalObservation{}, nil
	}
	w, err := e.api.GetWidget(ctx, name)
	if widgetapi.IsNotFound(err) {
		if reviewing(mg) && !meta.WasDeleted(mg) {
			mg.SetConditions(refusedReview(ReasonNotFound, fmt.Sprintf("Widget %s does not exist in the Widget API: there is nothing to review or take over. Check the external name.", name)))
		}
		return managed.ExternalObservation{}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot get widget")
	}

	// Ours: our marker, and the namespace the labels record is ours (see
	// ownership.Owns); a marker alone proves nothing.
	mine := ownership.Owns(mg, w.Labels)
	owner := w.Labels[ownership.OwnerLabel]
	if owner == "" && ownership.ReservedAgainst(mg, w.Labels) {
		// Released by another namespace's resource (or the platform's),
		// and reserved for it: whatever the status claims, this resource
		// never managed it. Checked before the recorded ID, which anyone
		// who may edit the resource's status can write.
		return e.reserved(mg, name)
	}
	// A widget whose ID we recorded is one we manage, even if someone
	// removed its ownership marker (that is drift, repaired below); unless
	// we recorded it only by observing it (an import review that was not
	// taken over yet): taking it over then is an adoption.
	known := mg.GetWidgetObservation().ID != "" && mg.GetWidgetObservation().ID == w.ID && !reviewedOnly(mg)
	e.adopting = owner == "" && !known
	e.migrating = mine && migrates(mg, w.Labels, e.cp)
	if meta.WasDeleted(mg) && (owner != "" && !mine || e.adopting) {
		// Not ours (another resource's, or never taken over): deleting
		// this resource must not delete the widget.
		return managed.ExternalObservation{}, nil
	}
	if owner != "" && !mine {
		if err := refuseAnother(mg, w, name, owner); err != nil {
			return managed.ExternalObservation{}, err
		}
	}
	if e.adopting && names.Defaulted(mg) && !observeOnly(mg) {
		return managed.ExternalObservation{}, errors.Errorf("a widget named %s already exists and no managed resource owns it; to adopt it, set the annotation %s: %s explicitly (or choose another name)", name, meta.AnnotationKeyExternalName, name)
	}
	if done, err := e.otherControlPlane(ctx, mg, w); done {
		return managed.ExternalObservation{}, err
	}

	p := mg.GetWidgetParameters()
	lateInit := lateInitialize(p, mg.GetWidgetInitParameters(), w)
	mg.SetWidgetObservation(observation(w))
	mg.SetConditions(readiness(w, meta.WasDeleted(mg)))

	o := managed.ExternalObservation{
		ResourceExists:          true,
		ResourceUpToDate:        true,
		ResourceLateInitialized: lateInit,
	}
	if w.Endpoint != "" {
		o.ConnectionDetails = managed.ConnectionDetails{"endpoint": []byte(w.Endpoint)}
	}
	if w.State == widgetapi.StateDeleting {
		// Being deleted (by us or out of band): nothing to update until it
		// is gone; an out-of-band delete is then repaired by re-creating.
		return o, nil
	}
	d := compare(p, w, ownership.Labels(mg, e.cp))
	o.ResourceUpToDate = d.empty()
	o.Diff = d.String()
	e.reportContest(mg, w)
	switch {
	case observeOnly(mg) && owner != "" && !mine:
		mg.SetConditions(managedByAnother(name, owner))
	case observeOnly(mg):
		mg.SetConditions(importReview(d))
	case mg.GetCondition(TypeUpToDate).Status != corev1.ConditionUnknown:
		// Taken over (this reconcile's Update puts the marker on): the
		// review no longer applies. Written now, with the status that
		// Update saves: nothing else may reconcile the resource for a poll
		// interval. A fixed message, so that drift repairs do not rewrite
		// it.
		mg.SetConditions(xpv2.Condition{
			Type:               TypeUpToDate,
			Status:             corev1.ConditionTrue,
			Reason:             ReasonManaged,
			Message:            "Fully managed: the provider applies the spec and repairs drift.",
			LastTransitionTime: metav1.Now(),
		})
	}
	return o, nil
}

// refuseAnother refuses a widget that another resource, owner, manages:
// another tenant's is not even observed, and nothing of it may reach mg's
// status, not even who owns it; one of mg's namespace may be observed
// (Observe-only), never managed.
func refuseAnother(mg commonv1beta1.WidgetResource, w *widgetapi.Widget, name, owner string) error {
	if !ownership.InReach(mg, w.Labels) {
		mg.SetWidgetObservation(commonv1beta1.WidgetObservation{})
		if reviewing(mg) {
			mg.SetConditions(refusedReview(ReasonOutOfReach, fmt.Sprintf("Widget %s is managed by a resource outside namespace %s: it can be neither reviewed nor taken over from here.", name, mg.GetNamespace())))
		}
		return errors.Errorf("widget %s is managed by a resource outside namespace %s, and a namespaced Widget can manage or observe only widgets that no resource manages or that a resource in its own namespace manages: choose another external name, or ask your platform team to give this namespace its own ProviderConfig and Widget API project", name, mg.GetNamespace())
	}
	if observeOnly(mg) {
		return nil
	}
	if reviewing(mg) {
		mg.SetConditions(managedByAnother(name, owner))
	}
	return errors.Errorf("widget %s is already managed by %s (label %s=%s); one widget can have only one managing resource: choose another external name, or delete that resource (to keep the widget, leave Delete out of its management policies or set deletionPolicy Orphan: the provider then removes the label, and this resource can adopt the widget); if that resource no longer exists, the label was left by a provider version that did not remove it: remove the label from the widget in the Widget API", name, ownership.Describe(owner), ownership.OwnerLabel, owner)
}

// migrates reports whether mg, which owns the widget that carries labels,
// rewrites its markers: they are in an older format (ownership.Migrates),
// or name no control plane while the provider has one (cp).
func migrates(mg commonv1beta1.WidgetResource, labels map[string]string, cp string) bool {
	return ownership.Migrates(mg, labels) || cp != "" && labels[ownership.ControlPlaneLabel] == ""
}

// reserved refuses a widget that a resource outside mg's namespace
// released (see ownership.ReservedAgainst). Nothing of the widget reaches mg's
// status, and the words name neither the releaser nor its namespace: only
// mg's own namespace, and the label that the platform team can remove.
func (e *external[T]) reserved(mg T, name string) (managed.ExternalObservation, error) {
	mg.SetWidgetObservation(commonv1beta1.WidgetObservation{})
	if meta.WasDeleted(mg) {
		// Never this resource's: deleting it leaves the widget alone.
		return managed.ExternalObservation{}, nil
	}
	if reviewing(mg) {
		mg.SetConditions(refusedReview(ReasonReserved, fmt.Sprintf("Widget %s was released by a resource outside namespace %s and is reserved for the namespace that released it: it can be neither reviewed nor taken over from here. The platform team can clear the reservation by removing the label %s from the widget in the Widget API.", name, mg.GetNamespace(), ownership.ReleasedByLabel)))
	}
	err := errors.Errorf("widget %s was released by a resource outside namespace %s and is reserved for the namespace that released it, so a namespaced Widget here can neither manage nor observe it: choose another external name, or ask your platform team to clear the reservation by removing the label %s from the widget in the Widget API", name, mg.GetNamespace(), ownership.ReleasedByLabel)
	e.record.Event(mg, event.Warning(event.Reason(ReasonReserved), err))
	return managed.ExternalObservation{}, err
}

// reviewedOnly reports whether mg's widget was only ever observed: an
// Observe-only import reviewed it (the UpToDate condition) and no takeover
// has completed since.
func reviewedOnly(mg commonv1beta1.WidgetResource) bool {
	c := mg.GetCondition(TypeUpToDate)
	return c.Status != corev1.ConditionUnknown && c.Reason != ReasonManaged
}

// neverCreated reports whether mg is a new, fully managed resource under the name
// the provider chose that has never asked for its widget: no create was ever
// started for it (crossplane-runtime saves external-create-pending before
// every create) and no widget was ever observed. Its widget is created
// without reading it first, which saves a Widget API request per new
// Widget. When the name is taken after all (the resource was deleted with
// deletionPolicy Orphan and made again, or someone created a widget under
// the hashed name), the create fails with a conflict and the retry, whose
// create is now pending, reads the widget and decides as for any other.
func neverCreated(mg commonv1beta1.WidgetResource) bool {
	return names.Defaulted(mg) &&
		meta.GetExternalCreatePending(mg).IsZero() &&
		mg.GetWidgetObservation().ID == "" &&
		!meta.WasDeleted(mg) &&
		fullyManaged(mg)
}

// fullyManaged reports whether the management policies are the default,
// which allow every action.
func fullyManaged(mg commonv1beta1.WidgetResource) bool {
	p := mg.GetManagementPolicies()
	return len(p) == 0 || len(p) == 1 && p[0] == xpv2.ManagementActionAll
}

// reviewing reports whether mg carries the import review: it is
// observe-only, or it was and has been switched to a takeover.
func reviewing(mg commonv1beta1.WidgetResource) bool {
	return observeOnly(mg) || mg.GetCondition(TypeUpToDate).Status != corev1.ConditionUnknown
}

// refusedReview is the UpToDate condition of a review that found nothing
// to take over: the widget is gone, or out of this resource's reach.
func refusedReview(reason xpv2.ConditionReason, msg string) xpv2.Condition {
	return xpv2.Condition{
		Type:               TypeUpToDate,
		Status:             corev1.ConditionFalse,
		Reason:             reason,
		Message:            msg,
		LastTransitionTime: metav1.Now(),
	}
}

// managedByAnother is the UpToDate condition of a review of a widget that
// another resource this one may see manages: a takeover would be refused.
func managedByAnother(name, owner string) xpv2.Condition {
	return refusedReview(ReasonManagedByAnother, fmt.Sprintf("Switching to full management would be refused: widget %s is already managed by %s (label %s=%s).", name, ownership.Describe(owner), ownership.OwnerLabel, owner))
}

// importReview is the UpToDate condition of an observe-only Widget: whether
// switching it to full management would change the widget, field by field
// (the same differences the provider would repair).
func importReview(d differences) xpv2.Condition {
	c := xpv2.Condition{
		Type:               TypeUpToDate,
		Status:             corev1.ConditionTrue,
		Reason:             ReasonNoDifference,
		Message:            "The widget matches the spec: switching to full management would change nothing.",
		LastTransitionTime: metav1.Now(),
	}
	if !d.empty() {
		c.Status = corev1.ConditionFalse
		c.Reason = ReasonWouldChange
		c.Message = "Switching to full management would change the widget: " + d.String()
	}
	return c
}

// Create creates the widget under the external name, carrying the ownership
// marker so a crash before the name is recorded cannot orphan it.
func (e *external[T]) Create(ctx context.Context, mg T) (managed.ExternalCreation, error) {
	name := meta.GetExternalName(mg)
	size, region, description, labels := creation(mg.GetWidgetParameters(), mg.GetWidgetInitParameters())
	w, err := e.api.CreateWidget(ctx, widgetapi.CreateWidgetRequest{
		Name:        name,
		Size:        size,
		Region:      region,
		Labels:      desiredLabels(labels, nil, ownership.Labels(mg, e.cp), nil),
		Description: description,
	})
	if widgetapi.IsAlreadyExists(err) {
		return managed.ExternalCreation{}, errors.Errorf("the Widget API already has a widget named %s (this resource was deleted with deletionPolicy Orphan and made again, the widget is still being deleted, or someone else created it); reading it on the next attempt", name)
	}
	if err != nil {
		return managed.ExternalCreation{}, errors.Wrap(err, "cannot create widget")
	}
	mg.SetWidgetObservation(observation(w))
	mg.SetConditions(readiness(w, false))
	return managed.ExternalCreation{}, nil
}

// Update makes the widget match the spec with a conditional PUT, so a
// concurrent change is never overwritten blindly. Only spec.forProvider is
// applied: spec.initProvider (the region among it) was for the creation.
func (e *external[T]) Update(ctx context.Context, mg T) (managed.ExternalUpdate, error) {
	name := meta.GetExternalName(mg)
	p, obs := mg.GetWidgetParameters(), mg.GetWidgetObservation()
	before := compare(p, fromObservation(obs), ownership.Labels(mg, e.cp))
	cause := e.cause(mg)
	// A contest stays for the owner to report (see reportContest); a
	// take-over ends it, and says when it happened.
	keep := ownership.ContestLabelsOf(obs.Labels)
	if e.takingOver != "" {
		keep = ownership.TakeOverLabels(e.clock())
	}
	w, err := e.api.ReplaceWidget(ctx, name, widgetapi.ReplaceWidgetRequest{
		Size:        deref(p.Size, obs.Size),
		Labels:      desiredLabels(p.Labels, obs.Labels, ownership.Labels(mg, e.cp), keep),
		Description: deref(p.Description, obs.Description),
	}, widgetapi.IfGeneration(obs.Generation))
	if widgetapi.IsPreconditionFailed(err) {
		return managed.ExternalUpdate{}, errors.Errorf("widget %s changed while it was being updated; reading it again", name)
	}
	if err != nil {
		return managed.ExternalUpdate{}, errors.Wrap(err, "cannot update widget")
	}
	mg.SetWidgetObservation(observation(w))
	mg.SetConditions(readiness(w, false))
	if e.takingOver != "" {
		mg.SetConditions(controlPlaneCondition(corev1.ConditionTrue, ReasonSoleControlPlane, fmt.Sprintf("Took widget %s over from control plane %s.", name, e.takingOver)))
	}

	e.metrics.Updates.WithLabelValues(e.kind, cause).Inc()
	switch cause {
	case "drift":
		recordDrift(mg, e.clock(), before.String())
		e.record.Event(mg, event.Normal(ReasonDriftRepaired, "Widget was changed outside Crossplane; restored it: "+before.String()))
	case "adopt":
		e.record.Event(mg, event.Normal(ReasonAdopted, "Adopted widget "+name+"; it is now managed by this resource"))
	case "takeover":
		e.record.Event(mg, event.Normal(ReasonTookOver, "Took widget "+name+" over from control plane "+e.takingOver+"; control plane "+e.cp+" manages it now, and the other one leaves it alone"))
	default:
		e.record.Event(mg, event.Normal(ReasonUpdated, "Updated widget to match the spec: "+before.String()))
	}
	// For the change log entry of this update (--enable-changelogs).
	return managed.ExternalUpdate{AdditionalDetails: managed.AdditionalDetails{"cause": cause, "diff": before.String()}}, nil
}

// cause classifies an update: adopting an unowned widget, following a spec
// change, or repairing drift (the spec has not changed since the last
// successful sync, so the widget must have changed behind our back).
func (e *external[T]) cause(mg T) string {
	if e.adopting {
		return "adopt"
	}
	if e.takingOver != "" {
		return "takeover"
	}
	if e.migrating {
		// The provider's own markers changed, not the user's spec nor
		// the widget behind our back.
		return "spec"
	}
	synced := mg.GetCondition(xpv2.TypeSynced)
	if synced.Status == "True" && synced.ObservedGeneration == mg.GetGeneration() {
		return "drift"
	}
	return "spec"
}

// Delete starts deleting the widget; the reconciler calls again until
// Observe reports it gone. A widget that is already gone is success.
func (e *external[T]) Delete(ctx context.Context, mg T) (managed.ExternalDelete, error) {
	_, err := e.api.DeleteWidget(ctx, meta.GetExternalName(mg))
	if err != nil && !widgetapi.IsNotFound(err) {
		return managed.ExternalDelete{}, errors.Wrap(err, "cannot delete widget")
	}
	mg.SetConditions(xpv2.Deleting())
	return managed.ExternalDelete{}, nil
}

// Disconnect is a no-op: the HTTP client is shared.
func (e *external[T]) Disconnect(context.Context) error { return nil }

// observeOnly reports whether the management policies only observe.
func observeOnly(mg commonv1beta1.WidgetResource) bool {
	p := mg.GetManagementPolicies()
	return len(p) == 1 && p[0] == xpv2.ManagementActionObserve
}

// readiness maps the widget's state to the Ready condition.
func readiness(w *widgetapi.Widget, deleting bool) xpv2.Condition {
	switch w.State {
	case widgetapi.StateReady:
		return xpv2.Available()
	case widgetapi.StateProvisioning:
		// No message: Crossplane's reconciler marks a resource it has just
		// created Creating without one, and the same condition keeps the
		// observations while the widget is provisioned from writing again.
		return xpv2.Creating()
	case widgetapi.StateResizing:
		return xpv2.Condition{
			Type:               xpv2.TypeReady,
			Status:             corev1.ConditionFalse,
			Reason:             ReasonResizing,
			Message:            "The Widget API is resizing the widget to " + w.Size,
			LastTransitionTime: metav1.Now(), // required by the CRD; like every xpv2 condition constructor
		}
	case widgetapi.StateFailed:
		return xpv2.Unavailable().WithMessage("The widget failed: " + w.Message)
	case widgetapi.StateDeleting:
		if deleting {
			return xpv2.Deleting()
		}
		return xpv2.Unavailable().WithMessage("The widget is being deleted outside Crossplane; it will be created again once it is gone")
	default:
		return xpv2.Unavailable().WithMessage(fmt.Sprintf("The widget is in state %q, which this provider does not know", w.State))
	}
}

// Setup adds a controller that reconciles Widgets of the kind gvk, whose Go
// type is T.
func Setup[T commonv1beta1.WidgetResource](mgr ctrl.Manager, o controller.Options, d mrsetup.Deps, gvk schema.GroupVersionKind, newObj func() T, newList func() resource.ManagedList) error {
	return mrsetup.Setup(mgr, o, d, gvk, newObj, newList, func(env mrsetup.Env) managed.TypedExternalConnector[T] {
		return &connector[T]{sessions: d.Sessions, delay: env.Limiter, record: env.Record, metrics: d.Metrics, kind: env.Kind, feedKind: env.Kind, cp: d.ControlPlane, now: d.Clock()}
	})
}

func deref(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// desiredLabels is the label map the widget should carry: the user's labels
// (or, when the spec names none, the labels it has) with exactly our
// ownership markers, and the contest labels of keep. A previous owner's
// markers, and a released widget's reservation, are never carried over:
// another namespace must not stay on a widget it no longer owns.
func desiredLabels(want, current, markers, keep map[string]string) map[string]string {
	src := want
	if src == nil {
		src = current
	}
	out := ownership.Without(src)
	maps.Copy(out, markers)
	maps.Copy(out, keep)
	return out
}
