package fn

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/reference"
	"github.com/crossplane/function-sdk-go/resource/composite"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/text"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Limits of the Widget API (widgetapi's rules) and the provider's CRDs.
// Every value the function composes is checked against them, or built to
// fit them, so that Crossplane never applies a managed resource the API
// server or the Widget API rejects.
const (
	// maxLabels is what a Widget's spec may hold: the Widget API's limit,
	// less the provider's ownership marker.
	maxLabels = widgetapi.MaxLabels - 1
	// maxLabelValueLength is in bytes: the CRD counts characters, the
	// Widget API bytes.
	maxLabelValueLength = widgetapi.MaxLabelValueLength
	// maxDescription is in characters, as the CRDs' maxLength and the
	// Widget API count.
	maxDescription = widgetapi.MaxDescriptionLength
)

// validateInput returns every invalid field of the function's input. The
// API server never validates a function's input, so this is its only check.
func validateInput(in *v1beta1.WidgetPolicy) field.ErrorList {
	var errs field.ErrorList
	if in.APIVersion != "" || in.Kind != "" {
		if in.APIVersion != v1beta1.APIVersion {
			errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), text.Shown(in.APIVersion), []string{v1beta1.APIVersion}))
		}
		if in.Kind != v1beta1.Kind {
			errs = append(errs, field.NotSupported(field.NewPath("kind"), text.Shown(in.Kind), []string{v1beta1.Kind}))
		}
	}
	errs = append(errs, validateRules(in.Rules, field.NewPath("rules"))...)
	errs = append(errs, validateDefaults(in.Defaults, in.Rules, field.NewPath("defaults"))...)
	errs = append(errs, validateProviderConfigs(in)...)
	errs = append(errs, validateTTL(in.TTL.Converging, field.NewPath("ttl", "converging"))...)
	errs = append(errs, validateTTL(in.TTL.Ready, field.NewPath("ttl", "ready"))...)
	errs = append(errs, validateRotationPolicy(in.Rotation, field.NewPath("rotation"))...)
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
				errs = append(errs, field.NotSupported(p.Child("allowedSizes").Index(i), v1beta1.Size(text.Shown(string(s))), v1beta1.Sizes))
			}
		}
	}
	if n := len(r.AllowedRegions); n > v1beta1.MaxAllowedRegions {
		errs = append(errs, field.TooMany(p.Child("allowedRegions"), n, v1beta1.MaxAllowedRegions))
	} else {
		for i, rg := range r.AllowedRegions {
			errs = append(errs, text.ValidateRegion(rg, p.Child("allowedRegions").Index(i))...)
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
			errs = append(errs, field.NotSupported(p.Child("size"), v1beta1.Size(text.Shown(string(d.Size))), v1beta1.Sizes))
		case sizesBounded && len(r.AllowedSizes) > 0 && !slices.Contains(r.AllowedSizes, d.Size):
			errs = append(errs, field.NotSupported(p.Child("size"), d.Size, r.AllowedSizes))
		}
	}
	if d.Size == "" && sizesBounded && len(r.AllowedSizes) > 0 && !slices.Contains(r.AllowedSizes, v1beta1.DefaultSize) {
		errs = append(errs, field.Required(p.Child("size"), fmt.Sprintf("rules.allowedSizes does not allow the built-in default %q, so set a default size it allows", v1beta1.DefaultSize)))
	}
	if d.Region != "" {
		errs = append(errs, text.ValidateRegion(d.Region, p.Child("region"))...)
		if len(r.AllowedRegions) > 0 && len(r.AllowedRegions) <= v1beta1.MaxAllowedRegions && !slices.Contains(r.AllowedRegions, d.Region) {
			errs = append(errs, field.NotSupported(p.Child("region"), text.Shown(d.Region), r.AllowedRegions))
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
			errs = append(errs, field.NotSupported(p.Child("kind"), v1beta1.ProviderConfigKind(text.Shown(string(ref.Kind))), []v1beta1.ProviderConfigKind{v1beta1.ProviderConfigKindNamespaced, v1beta1.ProviderConfigKindCluster}))
		}
		errs = append(errs, validateObjectName(ref.Name, p.Child("name"))...)
	}
	if ref := in.Legacy.ProviderConfigRef; ref != nil {
		errs = append(errs, validateObjectName(ref.Name, field.NewPath("legacy", "providerConfigRef", "name"))...)
	}
	if ns := in.Legacy.ConnectionSecretNamespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(field.NewPath("legacy", "connectionSecretNamespace"), text.Shown(ns), msg))
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
		errs = append(errs, field.Invalid(p, text.Shown(name), msg))
	}
	return errs
}

// isRegion reports whether r is a region of the Widget API, such as
// us-east-1.
func isRegion(r string) bool {
	return widgetapi.ValidRegion(r)
}

func validateLabelKey(k string, p *field.Path) field.ErrorList {
	switch {
	case !widgetapi.ValidLabelKey(k):
		return field.ErrorList{field.Invalid(p, text.Shown(k), "must be 1 to 63 lowercase letters, digits, '.', '_', '-' or '/', starting and ending with a letter or digit")}
	case strings.HasPrefix(k, commonv1beta1.OwnershipLabelPrefix):
		return field.ErrorList{field.Invalid(p, k, "the prefix "+commonv1beta1.OwnershipLabelPrefix+" is reserved for the provider; use another prefix")}
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
		kp := p.Key(text.Shown(k))
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

// validateIdentity checks what the function names and describes composed
// resources after: the XR's name, namespace and kind. Each must be what the
// API server allows for an object's name, a namespace and a kind.
func validateIdentity(xr *composite.Unstructured) field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	switch n := xr.GetName(); n {
	case "":
		errs = append(errs, field.Required(name, "Crossplane always sends the name of the composite resource"))
	default:
		errs = append(errs, validateDNS(n, name, validation.IsDNS1123Subdomain)...)
	}
	if ns := xr.GetNamespace(); ns != "" {
		errs = append(errs, validateDNS(ns, field.NewPath("metadata", "namespace"), validation.IsDNS1123Label)...)
	}
	if k := xr.GetKind(); k != "" {
		errs = append(errs, validateKind(k, field.NewPath("kind"))...)
	}
	return errs
}

// validateClaimReference checks the claim a legacy XR names: its kind,
// namespace and name, which the function describes composed resources by.
func validateClaimReference(ref *reference.Claim) field.ErrorList {
	p := field.NewPath("spec", "claimRef")
	var errs field.ErrorList
	errs = append(errs, validateKind(ref.Kind, p.Child("kind"))...)
	errs = append(errs, validateDNS(ref.Namespace, p.Child("namespace"), validation.IsDNS1123Label)...)
	errs = append(errs, validateDNS(ref.Name, p.Child("name"), validation.IsDNS1123Subdomain)...)
	return errs
}

// validateDNS checks that v is valid according to fn, such as
// validation.IsDNS1123Label.
func validateDNS(v string, p *field.Path, fn func(string) []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range fn(v) {
		errs = append(errs, field.Invalid(p, text.Shown(v), msg))
	}
	return errs
}

// validateKind checks that k is a kind the API server allows: lowercased, a
// DNS-1035 label, as a CustomResourceDefinition's kind must be.
func validateKind(k string, p *field.Path) field.ErrorList {
	if k == "" {
		return field.ErrorList{field.Required(p, "a kind is required")}
	}
	if len(k) > validation.DNS1035LabelMaxLength || len(validation.IsDNS1035Label(strings.ToLower(k))) > 0 {
		return field.ErrorList{field.Invalid(p, text.Shown(k), "must be a kind: at most 63 letters, digits and '-', starting with a letter and ending with a letter or digit")}
	}
	return nil
}
