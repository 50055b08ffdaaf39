package fn

import (
	"maps"
	"slices"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// A policy is the function's input with every default applied. It is
// derived from a valid WidgetPolicy only.
type policy struct {
	defaultSize   string
	defaultRegion string
	defaultKeys   int
	defaultLabels map[string]string

	// allowedSizes and allowedRegions are empty when everything is allowed.
	allowedSizes   []string
	allowedRegions []string
	requiredLabels []string
	maxKeys        int

	namespacedProviderConfig xpv2.ProviderConfigReference
	legacyProviderConfig     string
	legacySecretNamespace    string

	convergingTTL time.Duration
	readyTTL      time.Duration

	rotation rotationPolicy
}

// newPolicy validates the function's input and applies its defaults. The
// error, if any, lists every invalid field.
func newPolicy(in *v1beta1.WidgetPolicy) (policy, error) {
	if errs := validateInput(in); len(errs) > 0 {
		return policy{}, invalidInputFields(errs)
	}

	p := policy{
		defaultSize:   string(in.Defaults.Size),
		defaultRegion: in.Defaults.Region,
		defaultKeys:   int(ptr.Deref(in.Defaults.Keys, v1beta1.DefaultKeys)),
		defaultLabels: maps.Clone(in.Defaults.Labels),

		allowedRegions: slices.Clone(in.Rules.AllowedRegions),
		requiredLabels: slices.Sorted(slices.Values(in.Rules.RequiredLabels)),
		maxKeys:        int(ptr.Deref(in.Rules.MaxKeys, v1beta1.DefaultMaxKeys)),

		namespacedProviderConfig: xpv2.ProviderConfigReference{
			Kind: string(v1beta1.DefaultNamespacedProviderKind),
			Name: v1beta1.DefaultProviderConfigName,
		},
		legacyProviderConfig:  v1beta1.DefaultProviderConfigName,
		legacySecretNamespace: v1beta1.DefaultConnectionSecretNamespace,

		convergingTTL: v1beta1.DefaultConvergingTTL,
		readyTTL:      v1beta1.DefaultReadyTTL,

		rotation: newRotationPolicy(in.Rotation),
	}
	if p.defaultSize == "" {
		p.defaultSize = string(v1beta1.DefaultSize)
	}
	for _, s := range in.Rules.AllowedSizes {
		p.allowedSizes = append(p.allowedSizes, string(s))
	}
	if ref := in.Namespaced.ProviderConfigRef; ref != nil {
		if ref.Kind != "" {
			p.namespacedProviderConfig.Kind = string(ref.Kind)
		}
		if ref.Name != "" {
			p.namespacedProviderConfig.Name = ref.Name
		}
	}
	if ref := in.Legacy.ProviderConfigRef; ref != nil && ref.Name != "" {
		p.legacyProviderConfig = ref.Name
	}
	if in.Legacy.ConnectionSecretNamespace != "" {
		p.legacySecretNamespace = in.Legacy.ConnectionSecretNamespace
	}
	if d := in.TTL.Converging; d != nil {
		p.convergingTTL = d.Duration
	}
	if d := in.TTL.Ready; d != nil {
		p.readyTTL = d.Duration
	}
	return p, nil
}

// sizeAllowed reports whether the policy allows a widget of size s.
func (p policy) sizeAllowed(s string) bool {
	return len(p.allowedSizes) == 0 || slices.Contains(p.allowedSizes, s)
}

// regionAllowed reports whether the policy allows a new widget in region r.
func (p policy) regionAllowed(r string) bool {
	return len(p.allowedRegions) == 0 || slices.Contains(p.allowedRegions, r)
}
