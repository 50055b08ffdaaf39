package fn

import (
	"slices"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// An OnDelete is what deleting an XWidget does to its widget and access keys
// in the Widget API (spec.onDelete). The function expresses it the
// Crossplane v2 way, as management policies of the composed resources, not
// with the deprecated deletionPolicy: a resource whose policies lack Delete
// leaves its external resource when it is deleted, and provider-widget then
// removes its ownership marker, so that another resource can adopt it.
type OnDelete string

// What deleting an XWidget does.
const (
	// OnDeleteDelete deletes the widget and revokes its keys: the default.
	OnDeleteDelete OnDelete = "Delete"
	// OnDeleteKeepWidget leaves the widget and revokes its keys.
	OnDeleteKeepWidget OnDelete = "KeepWidget"
	// OnDeleteKeepWidgetAndKeys leaves the widget and its keys.
	OnDeleteKeepWidgetAndKeys OnDelete = "KeepWidgetAndKeys"
)

// statusOnDelete is the XR status field that says what deleting the XR
// keeps now, as the observed composed resources' policies say. It is unset
// while deleting the XR deletes the widget (the default), so that the status
// of an XR that keeps nothing is as it was before spec.onDelete existed.
const statusOnDelete = "status.onDelete"

// keepPolicies are the management policies of a composed resource whose
// external resource outlives it: everything but Delete.
var keepPolicies = []xpv2.ManagementAction{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}

// keepsWidget reports whether deleting the XR leaves the widget. The zero
// value is the default, Delete.
func (d OnDelete) keepsWidget() bool {
	return d == OnDeleteKeepWidget || d == OnDeleteKeepWidgetAndKeys
}

// resolveOnDelete reads spec.onDelete into s. The XRD's enum rejects other
// values at admission; the function checks again for what reaches it
// without admission (crossplane render, an XRD without the enum).
func resolveOnDelete(s *settings, x xwidget, p *field.Path) field.ErrorList {
	if x.spec.OnDelete == nil {
		return nil
	}
	v := OnDelete(*x.spec.OnDelete)
	if !slices.Contains([]OnDelete{OnDeleteDelete, OnDeleteKeepWidget, OnDeleteKeepWidgetAndKeys}, v) {
		return field.ErrorList{field.NotSupported(p, text.Shown(string(v)), []string{string(OnDeleteDelete), string(OnDeleteKeepWidget), string(OnDeleteKeepWidgetAndKeys)})}
	}
	s.onDelete = v
	return nil
}

// applyOnDelete gives the composed Widget and WidgetKeys the management
// policies that do what s.onDelete asks, and reports in the XR's status what
// deleting the XR keeps now. The default (Delete) leaves the policies unset,
// so the CRDs' default (["*"]) applies and output stays as it was before
// spec.onDelete existed.
func applyOnDelete(o *outcome, s settings, obs observedResources) error {
	for n, cd := range o.composed {
		keep := n == resourceWidget && s.onDelete.keepsWidget() ||
			n != resourceWidget && n != resourceConnectionSecret && s.onDelete == OnDeleteKeepWidgetAndKeys
		if !keep {
			continue
		}
		if err := setPolicies(cd, keepPolicies); err != nil {
			return errors.Wrapf(err, "cannot set the management policies of %s", n)
		}
	}
	if v := observedOnDelete(obs, s); v.keepsWidget() {
		return errors.Wrapf(o.xr.Resource.SetString(statusOnDelete, string(v)), "cannot set %s", statusOnDelete)
	}
	return nil
}

// setPolicies sets a desired composed resource's management policies.
func setPolicies(cd *resource.DesiredComposed, p []xpv2.ManagementAction) error {
	l := make([]any, 0, len(p))
	for _, a := range p {
		l = append(l, string(a))
	}
	return cd.Resource.SetValue("spec.managementPolicies", l)
}

// observedOnDelete says what deleting the XR would do to the resources that
// exist now: "" before its Widget exists. The keys are kept only when no
// observed WidgetKey would revoke its key, and some key says it keeps, or
// the XR asks to keep them (an XR without keys keeps none).
func observedOnDelete(obs observedResources, s settings) OnDelete {
	w, ok := obs.get(resourceWidget)
	if !ok {
		return ""
	}
	if deletes(w.Resource) {
		return OnDeleteDelete
	}
	keysKept := s.onDelete == OnDeleteKeepWidgetAndKeys
	for i := range s.keys {
		k, ok := obs.get(keyResourceName(i))
		if !ok {
			continue
		}
		if deletes(k.Resource) {
			return OnDeleteKeepWidget
		}
		keysKept = true
	}
	if keysKept {
		return OnDeleteKeepWidgetAndKeys
	}
	return OnDeleteKeepWidget
}

// deletes reports whether deleting the composed resource r deletes its
// external resource: its management policies are unset (the CRD defaults
// them to ["*"]), or hold "*" or Delete. A cluster-scoped resource with
// deletionPolicy Orphan and default policies keeps it too, as
// crossplane-runtime decides.
func deletes(r *composed.Unstructured) bool {
	var p []string
	if err := r.GetValueInto("spec.managementPolicies", &p); err != nil || len(p) == 0 {
		dp, _ := r.GetString("spec.deletionPolicy")
		return dp != string(xpv2.DeletionOrphan)
	}
	return slices.Contains(p, string(xpv2.ManagementActionAll)) || slices.Contains(p, string(xpv2.ManagementActionDelete))
}
