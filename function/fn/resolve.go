package fn

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// settings are the widget and keys an XR asks for, with the policy's
// defaults applied.
type settings struct {
	size        string
	region      string // Empty lets the Widget API choose.
	keys        int
	labels      map[string]string
	description string

	// secretName is the connection Secret of a namespaced XR.
	secretName string

	// onDelete is what deleting the XR does to the widget and its keys;
	// the zero value is the default, OnDeleteDelete.
	onDelete OnDelete

	// adopt is the widget the XR adopts, if any.
	adopt *adoption

	// rotation is how the XR's keys rotate, nil when they do not.
	rotation *keyRotation
}

// resolve applies the policy's defaults to the XR's spec and checks the
// result against the policy and the widget w that exists, if any. The error,
// if any, lists every offending field of the XR and what the policy allows.
//
// Every number and collection of the XR is checked against its bound before
// anything works on it: the work resolve does, and the size of what it
// returns, never grow with the numbers an XR asks for, such as spec.keys.
func resolve(x xwidget, pol policy, w widgetObservation) (settings, error) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := settings{
		size:        pol.defaultSize,
		region:      pol.defaultRegion,
		keys:        pol.defaultKeys,
		description: describe("", x.owner(), ", managed by Crossplane"),
	}

	if x.spec.Size != nil {
		s.size = *x.spec.Size
	}
	if !pol.sizeAllowed(s.size) || !slices.Contains(v1beta1.Sizes, v1beta1.Size(s.size)) {
		errs = append(errs, field.NotSupported(spec.Child("size"), text.Shown(s.size), allowedSizes(pol)))
	}

	errs = append(errs, resolveRegion(&s, x, pol, w.region, spec.Child("region"))...)

	if k := x.spec.Keys; k != nil {
		// Compared as int64, before any conversion: the policy's maximum is
		// at most v1beta1.MaxKeys, whatever the XRD allows.
		if *k < 0 || *k > int64(pol.maxKeys) {
			errs = append(errs, field.Invalid(spec.Child("keys"), *k, fmt.Sprintf("the platform allows 0 to %d access keys", pol.maxKeys)))
			s.keys = 0
		} else {
			s.keys = int(*k)
		}
	}

	errs = append(errs, resolveLabels(&s, x, pol, spec.Child("labels"))...)

	if x.spec.Description != nil {
		s.description = *x.spec.Description
		errs = append(errs, validateDescription(s.description, spec.Child("description"))...)
	}

	errs = append(errs, resolveOnDelete(&s, x, spec.Child("onDelete"))...)
	errs = append(errs, resolveAdopt(&s, x, spec.Child("adopt"))...)
	errs = append(errs, resolveRotation(&s, x, pol.rotation, spec.Child("rotation"))...)

	if x.flavour == FlavourNamespaced {
		errs = append(errs, resolveSecretName(&s, x, spec.Child("writeConnectionSecretToRef", "name"))...)
	}

	if len(errs) > 0 {
		return s, policyViolation(x, errs)
	}
	return s, nil
}

// resolveLabels merges the policy's default labels and the XR's, and checks
// them. The XR's labels are merged only once they are known to be few enough.
func resolveLabels(s *settings, x xwidget, pol policy, p *field.Path) field.ErrorList {
	errs := validateLabels(x.spec.Labels, p)
	if len(x.spec.Labels) > maxLabels {
		return errs
	}
	s.labels = maps.Clone(pol.defaultLabels)
	if len(x.spec.Labels) > 0 && s.labels == nil {
		s.labels = make(map[string]string, len(x.spec.Labels))
	}
	maps.Copy(s.labels, x.spec.Labels)
	if len(s.labels) > maxLabels {
		errs = append(errs, field.TooMany(p, len(s.labels), maxLabels-len(pol.defaultLabels)))
	}
	for _, k := range pol.requiredLabels {
		if _, ok := s.labels[k]; !ok {
			errs = append(errs, field.Required(p.Key(k), "the platform requires every widget to have this label"))
		}
	}
	return errs
}

// resolveRegion chooses the widget's region: the XR's, else the one the
// widget already has, else the policy's default. A widget cannot move, so an
// XR may not ask for another region than its widget's; the policy's allowed
// regions apply to new widgets only.
func resolveRegion(s *settings, x xwidget, pol policy, current string, p *field.Path) field.ErrorList {
	if current != "" {
		s.region = current
	}
	if x.spec.Region == nil {
		return nil
	}
	want := *x.spec.Region
	if errs := text.ValidateRegion(want, p); len(errs) > 0 {
		return errs
	}
	s.region = want
	switch {
	case current != "" && want != current:
		return field.ErrorList{field.Invalid(p, want, fmt.Sprintf("the widget already runs in %s and cannot move: set %s or remove the field, or create a new XWidget for another region", current, current))}
	case current == "" && !pol.regionAllowed(want):
		return field.ErrorList{field.NotSupported(p, want, pol.allowedRegions)}
	}
	return nil
}

// resolveSecretName chooses the name of a namespaced XR's connection Secret.
// It must not be the connection secret of one of the XR's WidgetKeys. It
// must run after s.keys is checked: it compares with each key's secret.
func resolveSecretName(s *settings, x xwidget, p *field.Path) field.ErrorList {
	s.secretName = childName(x.name, "-connection")
	ref := x.spec.WriteConnectionSecretToRef
	if ref == nil || ref.Name == "" {
		return nil
	}
	s.secretName = ref.Name
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
		errs = append(errs, field.Invalid(p, text.Shown(ref.Name), msg))
	}
	for i := range s.keys {
		if ref.Name == keySecretName(x, i) {
			errs = append(errs, field.Invalid(p, ref.Name, fmt.Sprintf("is the name of the connection secret of access key %d; choose another name", i)))
		}
	}
	return errs
}

func allowedSizes(pol policy) []string {
	if len(pol.allowedSizes) > 0 {
		return pol.allowedSizes
	}
	out := make([]string, 0, len(v1beta1.Sizes))
	for _, s := range v1beta1.Sizes {
		out = append(out, string(s))
	}
	return out
}
