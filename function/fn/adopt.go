package fn

import (
	"context"
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// Adoption through the platform API: an XWidget whose spec.adopt names a
// widget that already exists in the Widget API composes a Widget for that
// widget instead of creating one. In mode Review the Widget only observes
// (management policy Observe): nothing is changed, and the XWidget reports
// the provider's import review - what managing the widget would change - in
// its Adopted condition and status.adoption. In mode Manage the Widget
// takes the widget over once the review found it adoptable: from then on
// the spec wins and drift is repaired. The provider's tenancy rules decide
// what may be adopted; the function turns the review's refusals into
// field errors on spec.adopt.name that name no other tenant.

// AdoptMode is how an XWidget adopts its widget.
type AdoptMode string

// Adoption modes.
const (
	// AdoptReview observes the widget and reports what managing it would
	// change. It is the default.
	AdoptReview AdoptMode = "Review"
	// AdoptManage takes the widget over.
	AdoptManage AdoptMode = "Manage"
)

// adoptSpec is spec.adopt as an app team writes it.
type adoptSpec struct {
	Name string `json:"name"`
	Mode string `json:"mode,omitempty"`
}

// An adoption is a valid spec.adopt.
type adoption struct {
	name string
	mode AdoptMode
}

// typeAdopted is the XR condition that reports an adoption.
const typeAdopted = "Adopted"

// Reasons of the Adopted condition, and of the rejection of an adoption.
const (
	reasonReviewing       = "Reviewing"
	reasonWouldChange     = string(commonv1beta1.ReasonWouldChange)
	reasonNoDifference    = string(commonv1beta1.ReasonNoDifference)
	reasonTakingOver      = "TakingOver"
	reasonManaged         = string(commonv1beta1.ReasonManaged)
	reasonAdoptionRefused = "AdoptionRefused"

	// reasonWaitingForAdoption is a KeysReady reason: keys are created
	// once the XWidget manages the widget it adopts.
	reasonWaitingForAdoption = "WaitingForAdoption"
)

// XR status fields of an adoption.
const (
	statusAdoptionName   = "status.adoption.name"
	statusAdoptionMode   = "status.adoption.mode"
	statusAdoptionReview = "status.adoption.review"
)

// observePolicies observe only: a review, or a takeover not yet confirmed.
var observePolicies = []xpv2.ManagementAction{xpv2.ManagementActionObserve}

// allPolicies manage fully. They are the CRD's default, but an adopted
// Widget starts observe-only, so they are set explicitly.
var allPolicies = []xpv2.ManagementAction{xpv2.ManagementActionAll}

// resolveAdopt reads and checks spec.adopt into s. The XRD checks the same
// at admission; the function checks again for what bypasses it.
func resolveAdopt(s *settings, x xwidget, p *field.Path) field.ErrorList {
	a := x.spec.Adopt
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(a.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), text.Shown(a.Name), "must be the name of a widget in the Widget API: "+msg))
	}
	mode := AdoptMode(a.Mode)
	switch mode {
	case "":
		mode = AdoptReview
	case AdoptReview, AdoptManage:
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), text.Shown(a.Mode), []string{string(AdoptReview), string(AdoptManage)}))
	}
	s.adopt = &adoption{name: a.Name, mode: mode}
	return errs
}

// An adoptionState is what the observed Widget says about an adoption.
type adoptionState struct {
	// review is the provider's import review (condition UpToDate), if
	// any yet.
	review xpv2.Condition
	// found is whether the Widget has observed the widget.
	found bool
	// owned is whether the widget carries an ownership marker, which,
	// once the review says Managed, can only be this Widget's.
	owned bool
}

func readAdoption(ctx context.Context, obs observedResources) adoptionState {
	w, ok := obs.get(resourceWidget)
	if !ok {
		return adoptionState{}
	}
	var at commonv1beta1.WidgetObservation
	_ = w.Resource.GetValueInto("status.atProvider", &at)
	return adoptionState{
		review: conditionsOf(ctx, w.Resource).GetCondition(commonv1beta1.TypeUpToDate),
		found:  at.ID != "",
		owned:  at.Labels[ownerLabel] != "",
	}
}

// ownerLabel is the provider's ownership marker of a widget.
const ownerLabel = commonv1beta1.OwnershipLabelPrefix + "owner"

// confirmed reports whether the review found the widget and found it
// adoptable, so that a takeover may start.
func (a adoptionState) confirmed() bool {
	switch a.review.Reason {
	case commonv1beta1.ReasonWouldChange, commonv1beta1.ReasonNoDifference, commonv1beta1.ReasonManaged:
		return a.found
	default: // not reviewed yet, or refused: no such widget, another's, reserved
		return false
	}
}

// takenOver reports whether the Widget manages the widget: the review says
// Managed and the widget carries an ownership marker (this Widget's: the
// provider refuses a takeover of a widget another resource manages).
func (a adoptionState) takenOver() bool {
	return a.review.Reason == commonv1beta1.ReasonManaged && a.owned
}

// checkAdoption rejects an adoption the provider's review refused: no
// widget of that name, one that another resource manages, or one another
// namespace released (and so keeps reserved). The errors
// name no other tenant, whatever the review says (a cluster-scoped Widget,
// which a legacy XR composes, may see who owns the widget).
func checkAdoption(ctx context.Context, x xwidget, s settings, obs observedResources) error {
	if s.adopt == nil {
		return nil
	}
	p := field.NewPath("spec", "adopt", "name")
	var msg string
	switch readAdoption(ctx, obs).review.Reason {
	case commonv1beta1.ReasonNotFound:
		msg = "no widget of this name exists in the Widget API (in the project of this XWidget's ProviderConfig): check the name. spec.adopt.name cannot change, so delete this XWidget and create it again with the right name; nothing was created or changed"
	case commonv1beta1.ReasonOutOfReach, commonv1beta1.ReasonManagedByAnother:
		msg = "the widget is managed by another resource, so it cannot be adopted: adopt a widget that no resource manages (one created directly in the Widget API, or one an XWidget of this namespace left with spec.onDelete: KeepWidget); nothing was changed"
	case commonv1beta1.ReasonReserved:
		msg = "the widget was released by a resource of another namespace and stays reserved for that namespace, so it cannot be adopted here: if it was handed over to you, ask your platform team to remove the label widgetco.io/released-by from the widget; nothing was changed"
	default:
		return nil
	}
	errs := field.ErrorList{field.Invalid(p, s.adopt.name, msg)}
	return &rejection{
		reason:  reasonAdoptionRefused,
		message: fmt.Sprintf("%s cannot adopt widget %s: %s", x.owner(), s.adopt.name, text.Join(errs)),
		fields:  errs,
	}
}

// checkAdoptedSize holds an adopted widget whose XR leaves spec.size unset
// to the policy's sizes: such a widget keeps the size it has, which no
// other check sees. The error is on spec.size, which fixes it: a size the
// policy allows resizes the widget once the XR manages it. It is nil until
// the Widget has observed the widget's size.
func checkAdoptedSize(x xwidget, s settings, pol policy, w widgetObservation) error {
	size := w.atProvider.Size
	if s.adopt == nil || x.spec.Size != nil || size == "" || pol.sizeAllowed(size) {
		return nil
	}
	msg := fmt.Sprintf("widget %s is %s, a size the platform does not allow (allowed: %s): set spec.size to an allowed size, to which the widget is resized once this XWidget manages it; nothing was changed", s.adopt.name, text.Shown(size), strings.Join(allowedSizes(pol), ", "))
	return policyViolation(x, field.ErrorList{field.Required(field.NewPath("spec", "size"), msg)})
}

// applyAdoption makes the composed Widget adopt the widget s.adopt names:
// it names the widget, composes only the fields the XR sets (the widget
// keeps the others: the provider late-initializes them), observes until a
// takeover is asked for and confirmed, and holds back new keys until the
// widget is taken over (a WidgetKey needs a widget its namespace manages;
// existing keys of the widget are never touched). It reports the adoption
// in the Adopted condition and status.adoption. It must run after
// applyOnDelete, whose policies it refines.
func applyAdoption(ctx context.Context, o *outcome, x xwidget, s settings, obs observedResources) error {
	if s.adopt == nil {
		return nil
	}
	a := readAdoption(ctx, obs)
	cd := o.composed[resourceWidget]
	w := cd.Resource
	meta := w.GetAnnotations()
	if meta == nil {
		meta = map[string]string{}
	}
	meta["crossplane.io/external-name"] = s.adopt.name
	w.SetAnnotations(meta)
	// The widget exists: it is never created from this spec.
	unset := []string{"spec.initProvider"}
	if x.spec.Size == nil {
		unset = append(unset, "spec.forProvider.size")
	}
	if x.spec.Description == nil {
		unset = append(unset, "spec.forProvider.description")
	}
	for _, f := range unset {
		if err := fieldpath.Pave(w.Object).DeleteField(f); err != nil {
			return errors.Wrapf(err, "cannot remove %s from the Widget", f)
		}
	}

	manage := s.adopt.mode == AdoptManage && a.confirmed()
	policies := observePolicies
	switch {
	case manage && s.onDelete.keepsWidget():
		policies = keepPolicies
	case manage:
		policies = allPolicies
	}
	if err := setPolicies(cd, policies); err != nil {
		return errors.Wrap(err, "cannot set the management policies of the Widget")
	}

	if !a.takenOver() {
		holdKeys(o, obs, s)
		// Not Ready while it reviews: the XWidget does not serve the team
		// yet, and its keys wait.
		cd.Ready = resource.ReadyFalse
		o.ready = false
	}

	c := adoptedCondition(s.adopt, a)
	replaced := false
	for i := range o.conditions {
		if o.conditions[i].Type == typeAdopted {
			o.conditions[i], replaced = c, true
		}
	}
	if !replaced {
		o.conditions = append(o.conditions, c)
	}
	return adoptionStatus(o.xr, s.adopt, a)
}

// holdKeys removes the desired WidgetKeys that do not exist yet, and says in
// KeysReady that they wait for the takeover.
func holdKeys(o *outcome, obs observedResources, s settings) {
	for i := range s.keys {
		if n := keyResourceName(i); !obs.has(n) {
			delete(o.composed, n)
		}
	}
	if s.keys == 0 {
		return
	}
	for i := range o.conditions {
		if o.conditions[i].Type == typeKeysReady && o.conditions[i].Status != corev1.ConditionTrue {
			o.conditions[i].Reason = reasonWaitingForAdoption
			o.conditions[i].Message = fmt.Sprintf("Access keys are created once this XWidget manages widget %s (spec.adopt.mode: Manage); the widget's existing keys are never revoked.", s.adopt.name)
		}
	}
}

// adoptedCondition reports the adoption: the review, in the provider's own
// words, while the XWidget reviews or waits to take over; a fixed
// statement once it manages the widget.
func adoptedCondition(ad *adoption, a adoptionState) condition {
	c := condition{Type: typeAdopted, Status: corev1.ConditionFalse}
	switch {
	case a.takenOver():
		c.Status, c.Reason = corev1.ConditionTrue, reasonManaged
		c.Message = fmt.Sprintf("This XWidget manages widget %s: its spec wins and drift is repaired. Keys it creates are its own; the widget's existing keys are never revoked.", ad.name)
	case !a.confirmed():
		c.Reason = reasonReviewing
		c.Message = fmt.Sprintf("Reading widget %s in the Widget API to review what managing it would change.", ad.name)
	case ad.mode == AdoptManage:
		c.Reason = reasonTakingOver
		c.Message = fmt.Sprintf("Taking over widget %s. %s", ad.name, reviewText(a.review))
	default:
		c.Reason = string(a.review.Reason)
		c.Message = fmt.Sprintf("Review of widget %s; nothing is changed while spec.adopt.mode is Review. %s Set spec.adopt.mode: Manage to take it over.", ad.name, reviewText(a.review))
	}
	return c
}

// reviewText is the provider's review, as a sentence.
func reviewText(c xpv2.Condition) string {
	msg := strings.TrimSpace(text.Truncate(c.Message))
	if msg != "" && !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// adoptionStatus writes status.adoption: the widget, the mode in effect
// (Review until a takeover is confirmed) and, until the XWidget manages the
// widget, the provider's review.
func adoptionStatus(xr *resource.Composite, ad *adoption, a adoptionState) error {
	mode := AdoptReview
	if ad.mode == AdoptManage && a.confirmed() {
		mode = AdoptManage
	}
	fields := [][2]string{{statusAdoptionName, ad.name}, {statusAdoptionMode, string(mode)}}
	if !a.takenOver() && a.confirmed() {
		fields = append(fields, [2]string{statusAdoptionReview, reviewText(a.review)})
	}
	for _, f := range fields {
		if err := xr.Resource.SetString(f[0], f[1]); err != nil {
			return errors.Wrapf(err, "cannot set %s", f[0])
		}
	}
	return nil
}
