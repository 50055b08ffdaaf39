package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// Limits of the Widget API and the provider's CRDs.
const (
	// maxLabels is what a Widget's spec may hold: the Widget API allows 32
	// and the provider adds its ownership marker.
	maxLabels           = 31
	maxLabelValueLength = 63
	maxDescription      = 256
	maxRegionLength     = 32
)

var (
	// labelKey is the Widget API's (and the Widget CRD's) label key syntax.
	labelKey = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`)
	// region is the Widget API's region syntax, such as us-east-1.
	region = regexp.MustCompile(`^[a-z]+(-[a-z]+)*-[0-9]+$`)
)

// A rejection is why the function cannot compose an XR. It is a user-facing
// message: its reason and message become the PolicyCompliant condition of
// the XR and its claim, and the message the fatal result.
type rejection struct {
	reason  string
	message string

	// fields are the invalid fields, if the rejection is about fields.
	fields field.ErrorList
}

func (r *rejection) Error() string { return r.message }

// invalidInput rejects a function input that cannot be read.
func invalidInput(err error) error {
	return &rejection{
		reason:  reasonInvalidFunctionInput,
		message: "The platform's WidgetPolicy (the function input of the Composition) cannot be read, so no XWidget can be composed; the platform team must fix it: " + err.Error(),
	}
}

// invalidInputFields rejects a function input with invalid fields.
func invalidInputFields(errs field.ErrorList) error {
	return &rejection{
		reason:  reasonInvalidFunctionInput,
		message: "The platform's WidgetPolicy (the function input of the Composition) is invalid, so no XWidget can be composed; the platform team must fix it: " + join(errs),
		fields:  errs,
	}
}

// policyViolation rejects an XR that violates the policy.
func policyViolation(x xwidget, errs field.ErrorList) error {
	return &rejection{
		reason:  reasonPolicyViolation,
		message: fmt.Sprintf("%s violates the platform's widget policy; change these fields: %s", x.owner(), join(errs)),
		fields:  errs,
	}
}

// unreadable rejects a request the function cannot make sense of.
func unreadable(err error, what string) error {
	return &rejection{reason: reasonInvalidRequest, message: what + ": " + err.Error()}
}

// unsupported rejects an XR the function does not compose.
func unsupported(msg string) error {
	return &rejection{reason: reasonUnsupportedComposite, message: msg}
}

func join(errs field.ErrorList) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

// validateInput returns every invalid field of the function's input. The
// API server never validates a function's input, so this is its only check.
func validateInput(in *v1beta1.WidgetPolicy) field.ErrorList {
	var errs field.ErrorList
	if in.APIVersion != "" || in.Kind != "" {
		if in.APIVersion != v1beta1.APIVersion {
			errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), in.APIVersion, []string{v1beta1.APIVersion}))
		}
		if in.Kind != v1beta1.Kind {
			errs = append(errs, field.NotSupported(field.NewPath("kind"), in.Kind, []string{v1beta1.Kind}))
		}
	}
	errs = append(errs, validateRules(in.Rules, field.NewPath("rules"))...)
	errs = append(errs, validateDefaults(in.Defaults, in.Rules, field.NewPath("defaults"))...)
	errs = append(errs, validateProviderConfigs(in)...)
	errs = append(errs, validateTTL(in.TTL.Converging, field.NewPath("ttl", "converging"))...)
	errs = append(errs, validateTTL(in.TTL.Ready, field.NewPath("ttl", "ready"))...)
	return errs
}

func validateRules(r v1beta1.Rules, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range r.AllowedSizes {
		if !slices.Contains(v1beta1.Sizes, s) {
			errs = append(errs, field.NotSupported(p.Child("allowedSizes").Index(i), s, v1beta1.Sizes))
		}
	}
	for i, rg := range r.AllowedRegions {
		errs = append(errs, validateRegion(rg, p.Child("allowedRegions").Index(i))...)
	}
	for i, k := range r.RequiredLabels {
		errs = append(errs, validateLabelKey(k, p.Child("requiredLabels").Index(i))...)
	}
	if r.MaxKeys != nil && (*r.MaxKeys < 0 || *r.MaxKeys > v1beta1.MaxKeys) {
		errs = append(errs, field.Invalid(p.Child("maxKeys"), *r.MaxKeys, fmt.Sprintf("must be between 0 and %d", v1beta1.MaxKeys)))
	}
	return errs
}

func validateDefaults(d v1beta1.Defaults, r v1beta1.Rules, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d.Size != "" {
		switch {
		case !slices.Contains(v1beta1.Sizes, d.Size):
			errs = append(errs, field.NotSupported(p.Child("size"), d.Size, v1beta1.Sizes))
		case len(r.AllowedSizes) > 0 && !slices.Contains(r.AllowedSizes, d.Size):
			errs = append(errs, field.NotSupported(p.Child("size"), d.Size, r.AllowedSizes))
		}
	}
	if d.Size == "" && len(r.AllowedSizes) > 0 && !slices.Contains(r.AllowedSizes, v1beta1.DefaultSize) {
		errs = append(errs, field.Required(p.Child("size"), fmt.Sprintf("rules.allowedSizes does not allow the built-in default %q, so set a default size it allows", v1beta1.DefaultSize)))
	}
	if d.Region != "" {
		errs = append(errs, validateRegion(d.Region, p.Child("region"))...)
		if len(r.AllowedRegions) > 0 && !slices.Contains(r.AllowedRegions, d.Region) {
			errs = append(errs, field.NotSupported(p.Child("region"), d.Region, r.AllowedRegions))
		}
	}
	maxKeys := ptr.Deref(r.MaxKeys, v1beta1.DefaultMaxKeys)
	if keys := ptr.Deref(d.Keys, v1beta1.DefaultKeys); keys < 0 || keys > maxKeys {
		errs = append(errs, field.Invalid(p.Child("keys"), keys, fmt.Sprintf("must be between 0 and rules.maxKeys (%d)", maxKeys)))
	}
	errs = append(errs, validateLabels(d.Labels, p.Child("labels"))...)
	return errs
}

func validateProviderConfigs(in *v1beta1.WidgetPolicy) field.ErrorList {
	var errs field.ErrorList
	if ref := in.Namespaced.ProviderConfigRef; ref != nil {
		p := field.NewPath("namespaced", "providerConfigRef")
		if ref.Kind != "" && ref.Kind != v1beta1.ProviderConfigKindNamespaced && ref.Kind != v1beta1.ProviderConfigKindCluster {
			errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, []v1beta1.ProviderConfigKind{v1beta1.ProviderConfigKindNamespaced, v1beta1.ProviderConfigKindCluster}))
		}
		errs = append(errs, validateObjectName(ref.Name, p.Child("name"))...)
	}
	if ref := in.Legacy.ProviderConfigRef; ref != nil {
		errs = append(errs, validateObjectName(ref.Name, field.NewPath("legacy", "providerConfigRef", "name"))...)
	}
	if ns := in.Legacy.ConnectionSecretNamespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(field.NewPath("legacy", "connectionSecretNamespace"), ns, msg))
		}
	}
	return errs
}

func validateTTL(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d == nil || d.Duration > 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be a positive duration, such as 30s or 5m")}
}

func validateObjectName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateRegion(r string, p *field.Path) field.ErrorList {
	if len(r) > maxRegionLength || !region.MatchString(r) {
		return field.ErrorList{field.Invalid(p, r, "must be a region such as us-east-1: lowercase words and a number, separated by '-', at most 32 characters")}
	}
	return nil
}

func validateLabelKey(k string, p *field.Path) field.ErrorList {
	switch {
	case !labelKey.MatchString(k):
		return field.ErrorList{field.Invalid(p, k, "must be 1 to 63 lowercase letters, digits, '.', '_', '-' or '/', starting and ending with a letter or digit")}
	case strings.HasPrefix(k, commonv1alpha1.OwnershipLabelPrefix):
		return field.ErrorList{field.Invalid(p, k, "the prefix "+commonv1alpha1.OwnershipLabelPrefix+" is reserved for the provider; use another prefix")}
	}
	return nil
}

func validateLabels(labels map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(labels) > maxLabels {
		errs = append(errs, field.TooMany(p, len(labels), maxLabels))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		errs = append(errs, validateLabelKey(k, p.Key(k))...)
		if len(labels[k]) > maxLabelValueLength {
			errs = append(errs, field.TooLong(p.Key(k), "", maxLabelValueLength))
		}
	}
	return errs
}

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
}

// resolve applies the policy's defaults to the XR's spec and checks the
// result against the policy and the widget w that exists, if any. The error, if any, lists every offending field
// of the XR and what the policy allows.
func resolve(x xwidget, pol policy, w widgetObservation) (settings, error) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := settings{
		size:        pol.defaultSize,
		region:      pol.defaultRegion,
		keys:        pol.defaultKeys,
		description: fmt.Sprintf("%s, managed by Crossplane", x.owner()),
	}

	if x.spec.Size != nil {
		s.size = *x.spec.Size
	}
	if !pol.sizeAllowed(s.size) || !slices.Contains(v1beta1.Sizes, v1beta1.Size(s.size)) {
		errs = append(errs, field.NotSupported(spec.Child("size"), s.size, allowedSizes(pol)))
	}

	errs = append(errs, resolveRegion(&s, x, pol, w.region, spec.Child("region"))...)

	if x.spec.Keys != nil {
		s.keys = int(*x.spec.Keys)
	}
	if s.keys < 0 || s.keys > pol.maxKeys {
		errs = append(errs, field.Invalid(spec.Child("keys"), s.keys, fmt.Sprintf("the platform allows 0 to %d access keys", pol.maxKeys)))
	}

	s.labels = maps.Clone(pol.defaultLabels)
	if len(x.spec.Labels) > 0 && s.labels == nil {
		s.labels = make(map[string]string, len(x.spec.Labels))
	}
	maps.Copy(s.labels, x.spec.Labels)
	errs = append(errs, validateLabels(x.spec.Labels, spec.Child("labels"))...)
	if len(x.spec.Labels) <= maxLabels && len(s.labels) > maxLabels {
		errs = append(errs, field.TooMany(spec.Child("labels"), len(s.labels), maxLabels-len(pol.defaultLabels)))
	}
	for _, k := range pol.requiredLabels {
		if _, ok := s.labels[k]; !ok {
			errs = append(errs, field.Required(spec.Child("labels").Key(k), "the platform requires every widget to have this label"))
		}
	}

	if x.spec.Description != nil {
		s.description = *x.spec.Description
		if len(s.description) > maxDescription {
			errs = append(errs, field.TooLong(spec.Child("description"), "", maxDescription))
		}
	}

	if x.flavour == FlavourNamespaced {
		errs = append(errs, resolveSecretName(&s, x, spec.Child("writeConnectionSecretToRef", "name"))...)
	}

	if len(errs) > 0 {
		return s, policyViolation(x, errs)
	}
	return s, nil
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
	if errs := validateRegion(want, p); len(errs) > 0 {
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
// It must not be the connection secret of one of the XR's WidgetKeys.
func resolveSecretName(s *settings, x xwidget, p *field.Path) field.ErrorList {
	s.secretName = childName(x.name, "-connection")
	ref := x.spec.WriteConnectionSecretToRef
	if ref == nil || ref.Name == "" {
		return nil
	}
	s.secretName = ref.Name
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
		errs = append(errs, field.Invalid(p, ref.Name, msg))
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
