package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// Limits of the Widget API and the provider's CRDs. Every value the function
// composes is checked against them, or built to fit them, so that Crossplane
// never applies a managed resource the API server or the Widget API rejects.
const (
	// maxLabels is what a Widget's spec may hold: the Widget API allows 32
	// and the provider adds its ownership marker.
	maxLabels = 31
	// maxLabelValueLength is in bytes: the CRD counts characters, the
	// Widget API bytes.
	maxLabelValueLength = 63
	// maxDescription is in characters, as the CRDs' maxLength and the
	// Widget API count.
	maxDescription  = 256
	maxRegionLength = 32
)

// maxShown is the most characters of a value from the request that a message
// repeats, so that a huge value cannot make a huge condition or event.
const maxShown = 64

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
		message: "The platform's WidgetPolicy (the function input of the Composition) cannot be read, so no XWidget can be composed; the platform team must fix it: " + truncate(err.Error()),
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
	return &rejection{reason: reasonInvalidRequest, message: what + ": " + truncate(err.Error())}
}

// noComposite rejects a request without an observed XR: there is nothing to
// compose.
func noComposite() error {
	return &rejection{
		reason:  reasonInvalidRequest,
		message: "The request has no observed composite resource, so there is nothing to compose. Crossplane always sends the composite resource it reconciles: check what sent the request (crossplane render needs an XR).",
	}
}

// invalidComposite rejects an XR whose identity - name, namespace, kind or
// claim - no API server accepts: the function names and describes the
// resources it composes after it.
func invalidComposite(errs field.ErrorList) error {
	return &rejection{
		reason:  reasonInvalidRequest,
		message: "The composite resource cannot be composed because the request describes it with invalid fields; Crossplane sends only composite resources the API server accepted, so check what sent the request: " + join(errs),
		fields:  errs,
	}
}

// invalidClaimReference rejects a legacy XR whose spec.claimRef does not
// name a claim the API server could hold.
func invalidClaimReference(x xwidget, errs field.ErrorList) error {
	return &rejection{
		reason:  reasonInvalidRequest,
		message: fmt.Sprintf("%s names its claim with invalid fields; Crossplane sets spec.claimRef of the composite resource of a claim, so remove or correct it: %s", x, join(errs)),
		fields:  errs,
	}
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
			errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), shown(in.APIVersion), []string{v1beta1.APIVersion}))
		}
		if in.Kind != v1beta1.Kind {
			errs = append(errs, field.NotSupported(field.NewPath("kind"), shown(in.Kind), []string{v1beta1.Kind}))
		}
	}
	errs = append(errs, validateRules(in.Rules, field.NewPath("rules"))...)
	errs = append(errs, validateDefaults(in.Defaults, in.Rules, field.NewPath("defaults"))...)
	errs = append(errs, validateProviderConfigs(in)...)
	errs = append(errs, validateTTL(in.TTL.Converging, field.NewPath("ttl", "converging"))...)
	errs = append(errs, validateTTL(in.TTL.Ready, field.NewPath("ttl", "ready"))...)
	return errs
}

// validateRules checks the policy's rules. A list longer than its bound is
// reported alone, without checking its items: a message about each item of a
// huge list would be huge too.
func validateRules(r v1beta1.Rules, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(r.AllowedSizes); n > len(v1beta1.Sizes) {
		errs = append(errs, field.TooMany(p.Child("allowedSizes"), n, len(v1beta1.Sizes)))
	} else {
		for i, s := range r.AllowedSizes {
			if !slices.Contains(v1beta1.Sizes, s) {
				errs = append(errs, field.NotSupported(p.Child("allowedSizes").Index(i), v1beta1.Size(shown(string(s))), v1beta1.Sizes))
			}
		}
	}
	if n := len(r.AllowedRegions); n > v1beta1.MaxAllowedRegions {
		errs = append(errs, field.TooMany(p.Child("allowedRegions"), n, v1beta1.MaxAllowedRegions))
	} else {
		for i, rg := range r.AllowedRegions {
			errs = append(errs, validateRegion(rg, p.Child("allowedRegions").Index(i))...)
		}
	}
	if n := len(r.RequiredLabels); n > maxLabels {
		errs = append(errs, field.TooMany(p.Child("requiredLabels"), n, maxLabels))
	} else {
		for i, k := range r.RequiredLabels {
			errs = append(errs, validateLabelKey(k, p.Child("requiredLabels").Index(i))...)
		}
	}
	if r.MaxKeys != nil && (*r.MaxKeys < 0 || *r.MaxKeys > v1beta1.MaxKeys) {
		errs = append(errs, field.Invalid(p.Child("maxKeys"), *r.MaxKeys, fmt.Sprintf("must be between 0 and %d", v1beta1.MaxKeys)))
	}
	return errs
}

// validateDefaults checks the policy's defaults, and that the rules allow
// them. Rules with a list longer than its bound, which validateRules reports,
// are not compared with: the message would list every item.
func validateDefaults(d v1beta1.Defaults, r v1beta1.Rules, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	sizesBounded := len(r.AllowedSizes) <= len(v1beta1.Sizes)
	if d.Size != "" {
		switch {
		case !slices.Contains(v1beta1.Sizes, d.Size):
			errs = append(errs, field.NotSupported(p.Child("size"), v1beta1.Size(shown(string(d.Size))), v1beta1.Sizes))
		case sizesBounded && len(r.AllowedSizes) > 0 && !slices.Contains(r.AllowedSizes, d.Size):
			errs = append(errs, field.NotSupported(p.Child("size"), d.Size, r.AllowedSizes))
		}
	}
	if d.Size == "" && sizesBounded && len(r.AllowedSizes) > 0 && !slices.Contains(r.AllowedSizes, v1beta1.DefaultSize) {
		errs = append(errs, field.Required(p.Child("size"), fmt.Sprintf("rules.allowedSizes does not allow the built-in default %q, so set a default size it allows", v1beta1.DefaultSize)))
	}
	if d.Region != "" {
		errs = append(errs, validateRegion(d.Region, p.Child("region"))...)
		if len(r.AllowedRegions) > 0 && len(r.AllowedRegions) <= v1beta1.MaxAllowedRegions && !slices.Contains(r.AllowedRegions, d.Region) {
			errs = append(errs, field.NotSupported(p.Child("region"), shown(d.Region), r.AllowedRegions))
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
			errs = append(errs, field.NotSupported(p.Child("kind"), v1beta1.ProviderConfigKind(shown(string(ref.Kind))), []v1beta1.ProviderConfigKind{v1beta1.ProviderConfigKindNamespaced, v1beta1.ProviderConfigKindCluster}))
		}
		errs = append(errs, validateObjectName(ref.Name, p.Child("name"))...)
	}
	if ref := in.Legacy.ProviderConfigRef; ref != nil {
		errs = append(errs, validateObjectName(ref.Name, field.NewPath("legacy", "providerConfigRef", "name"))...)
	}
	if ns := in.Legacy.ConnectionSecretNamespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(field.NewPath("legacy", "connectionSecretNamespace"), shown(ns), msg))
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
		errs = append(errs, field.Invalid(p, shown(name), msg))
	}
	return errs
}

func validateRegion(r string, p *field.Path) field.ErrorList {
	if !isRegion(r) {
		return field.ErrorList{field.Invalid(p, shown(r), "must be a region such as us-east-1: lowercase words and a number, separated by '-', at most 32 characters")}
	}
	return nil
}

// isRegion reports whether r is a region of the Widget API, such as
// us-east-1.
func isRegion(r string) bool {
	return len(r) <= maxRegionLength && region.MatchString(r)
}

func validateLabelKey(k string, p *field.Path) field.ErrorList {
	switch {
	case !labelKey.MatchString(k):
		return field.ErrorList{field.Invalid(p, shown(k), "must be 1 to 63 lowercase letters, digits, '.', '_', '-' or '/', starting and ending with a letter or digit")}
	case strings.HasPrefix(k, commonv1alpha1.OwnershipLabelPrefix):
		return field.ErrorList{field.Invalid(p, k, "the prefix "+commonv1alpha1.OwnershipLabelPrefix+" is reserved for the provider; use another prefix")}
	}
	return nil
}

// validateLabels checks labels against the Widget CRD and the Widget API.
// More labels than a widget may carry are reported alone, without checking
// each label: a message about each label of a huge map would be huge too.
func validateLabels(labels map[string]string, p *field.Path) field.ErrorList {
	if len(labels) > maxLabels {
		return field.ErrorList{field.TooMany(p, len(labels), maxLabels)}
	}
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kp := p.Key(shown(k))
		errs = append(errs, validateLabelKey(k, kp)...)
		switch v := labels[k]; {
		case len(v) > maxLabelValueLength:
			errs = append(errs, field.TooLong(kp, "", maxLabelValueLength))
		case !printable(v, false):
			errs = append(errs, field.Invalid(kp, field.OmitValueType{}, "the value must hold only printable characters: letters, digits, punctuation, symbols and spaces"))
		}
	}
	return errs
}

// validateDescription checks a widget's description against the Widget CRD
// and the Widget API: at most 256 characters, all printable, spaces, tabs or
// newlines.
func validateDescription(d string, p *field.Path) field.ErrorList {
	// A description of more bytes than 256 characters can take is too long
	// whatever it holds: it is rejected without reading it.
	if len(d) > maxDescription*utf8.UTFMax || utf8.RuneCountInString(d) > maxDescription {
		return field.ErrorList{field.TooLong(p, "", maxDescription)}
	}
	if !printable(d, true) {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must hold only printable characters (letters, digits, punctuation, symbols), spaces, tabs and newlines")}
	}
	return nil
}

// printable reports whether s is valid UTF-8 of letters, marks, digits,
// punctuation, symbols and ASCII spaces, and, when text is true, tabs and
// newlines: what the Widget CRD's description rule and the Widget API allow.
func printable(s string, text bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && (!text || (r != '\t' && r != '\n')) {
			return false
		}
	}
	return true
}

// shown is a value from the request as a message repeats it: at most
// maxShown characters, marked with "..." when shortened.
func shown(s string) string {
	if head, cut := firstRunes(s, maxShown); cut {
		return head + "..."
	}
	return s
}

// firstRunes returns the first n characters of s, and whether that is not
// all of s. It reads no more of s than it returns.
func firstRunes(s string, n int) (string, bool) {
	i := 0
	for range n {
		if i >= len(s) {
			return s, false
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], i < len(s)
}

// describe returns prefix + who + suffix: the description of a resource
// composed for who. When it would be longer than a description may be, who
// is shortened on a character boundary and marked with "...", so that the
// description always fits. The result depends only on its arguments.
func describe(prefix, who, suffix string) string {
	room := maxDescription - utf8.RuneCountInString(prefix) - utf8.RuneCountInString(suffix)
	if head, cut := firstRunes(who, room); !cut {
		return prefix + head + suffix
	}
	head, _ := firstRunes(who, room-len("..."))
	return prefix + head + "..." + suffix
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
		errs = append(errs, field.NotSupported(spec.Child("size"), shown(s.size), allowedSizes(pol)))
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
		errs = append(errs, field.Invalid(p, shown(ref.Name), msg))
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
