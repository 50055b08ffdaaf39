package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, version and kind of the function's input.
const (
	Group   = "fn.widgetco.io"
	Version = "v1beta1"
	Kind    = "WidgetPolicy"

	// APIVersion is the apiVersion a WidgetPolicy must declare.
	APIVersion = Group + "/" + Version
)

// Defaults used for a field of the WidgetPolicy that the platform team does
// not set.
const (
	DefaultSize                      = SizeSmall
	DefaultKeys                      = int32(1)
	DefaultMaxKeys                   = int32(3)
	DefaultProviderConfigName        = "default"
	DefaultNamespacedProviderKind    = ProviderConfigKindCluster
	DefaultConnectionSecretNamespace = "crossplane-system" //nolint:gosec // G101: a namespace name, not a credential.
	DefaultConvergingTTL             = time.Minute
	DefaultReadyTTL                  = 10 * time.Minute

	// MaxKeys is the most access keys any XWidget can have, whatever the
	// policy says and even when the CompositeResourceDefinition sets no
	// maximum for spec.keys: the function rejects an XWidget that asks for
	// more than rules.maxKeys before it does any work for it.
	MaxKeys = int32(10)

	// MaxAllowedRegions is the most regions rules.allowedRegions may list.
	MaxAllowedRegions = 64
)

// A Size of a widget.
// +kubebuilder:validation:Enum=small;medium;large
type Size string

// Widget sizes.
const (
	SizeSmall  Size = "small"
	SizeMedium Size = "medium"
	SizeLarge  Size = "large"
)

// Sizes are every size the Widget API offers, smallest first.
var Sizes = []Size{SizeSmall, SizeMedium, SizeLarge}

// A ProviderConfigKind is the kind of ProviderConfig that a namespaced managed
// resource uses.
// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
type ProviderConfigKind string

// ProviderConfig kinds of the namespaced widget.m.widgetco.io group.
const (
	// ProviderConfigKindNamespaced is a ProviderConfig in the XWidget's own
	// namespace.
	ProviderConfigKindNamespaced ProviderConfigKind = "ProviderConfig"
	// ProviderConfigKindCluster is a ClusterProviderConfig.
	ProviderConfigKindCluster ProviderConfigKind = "ClusterProviderConfig"
)

// A WidgetPolicy is the input of function-widget: the defaults and the policy
// that a platform team sets for every XWidget composed by one Composition.
// Every field is optional; an unset field gets the default its description
// names. A pipeline step without input behaves as if it had an empty
// WidgetPolicy.
//
// The function checks every XWidget against the policy. An XWidget that
// violates it is not composed (nothing that exists is changed or deleted):
// the function returns a fatal result, and the XWidget and its claim get a
// PolicyCompliant condition with status False that names each offending
// field and what the policy allows.
//
// Besides the policy, the function holds every XWidget to the limits of the
// Widget and WidgetKey managed resources, whatever its
// CompositeResourceDefinition allows: at most 10 access keys, at most 31
// labels of printable values, a description of at most 256 printable
// characters. A description the function makes itself, from the name of
// the XWidget or its claim, is shortened to fit.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
type WidgetPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Defaults for the fields an XWidget does not set.
	// +optional
	Defaults Defaults `json:"defaults,omitempty"`

	// Rules every XWidget must follow.
	// +optional
	Rules Rules `json:"rules,omitempty"`

	// Namespaced configures the managed resources composed for Crossplane v2
	// namespaced XWidgets: namespaced Widgets and WidgetKeys in the
	// widget.m.widgetco.io group, in the XWidget's namespace.
	// +optional
	Namespaced Namespaced `json:"namespaced,omitempty"`

	// Legacy configures the managed resources composed for legacy
	// (LegacyCluster) XWidgets, the kind that WidgetClaims create:
	// cluster-scoped Widgets and WidgetKeys in the widget.widgetco.io group.
	// +optional
	Legacy Legacy `json:"legacy,omitempty"`

	// TTL says how long Crossplane may cache the function's response before
	// it calls the function again for the same XWidget.
	// +optional
	TTL TTL `json:"ttl,omitempty"`

	// Rotation is how the access keys of every XWidget are rotated: a
	// default period and overlap, and the bounds of what an XWidget may
	// ask for (spec.rotation).
	// +optional
	Rotation RotationPolicy `json:"rotation,omitempty"`
}

// Defaults for the fields an XWidget does not set.
type Defaults struct {
	// Size of a widget whose XWidget sets none. Defaults to small. It must be
	// one of rules.allowedSizes.
	// +optional
	Size Size `json:"size,omitempty"`

	// Region of a widget whose XWidget sets none. When unset too, the Widget
	// API chooses its own default region. A widget's region cannot change,
	// so changing this default affects only widgets created afterwards.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]+(-[a-z]+)*-[0-9]+$`
	Region string `json:"region,omitempty"`

	// Keys is the number of access keys of an XWidget that sets none.
	// Defaults to 1. It must not exceed rules.maxKeys.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Keys *int32 `json:"keys,omitempty"`

	// Labels every widget gets. An XWidget's own labels override these for
	// the same key. Keys with the prefix widgetco.io/ are reserved for the
	// provider.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('widgetco.io/'))",message="label keys with the prefix widgetco.io/ are reserved for the provider"
	Labels map[string]string `json:"labels,omitempty"`
}

// Rules every XWidget must follow.
type Rules struct {
	// AllowedSizes are the sizes an XWidget may ask for. Empty allows every
	// size.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	AllowedSizes []Size `json:"allowedSizes,omitempty"`

	// AllowedRegions are the regions an XWidget may ask for, at most 64.
	// Empty allows every region.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^[a-z]+(-[a-z]+)*-[0-9]+$`
	AllowedRegions []string `json:"allowedRegions,omitempty"`

	// RequiredLabels are the label keys every widget must have, from the
	// XWidget's labels or from defaults.labels: at most 31, the most labels
	// a widget can have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=31
	RequiredLabels []string `json:"requiredLabels,omitempty"`

	// MaxKeys is the most access keys an XWidget may ask for. Defaults to 3;
	// at most 10. An XWidget never gets more than 10 access keys, even when
	// its CompositeResourceDefinition sets no maximum for spec.keys: the
	// function rejects an XWidget that asks for more than maxKeys before it
	// does any work for it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	MaxKeys *int32 `json:"maxKeys,omitempty"`
}

// Namespaced configures the managed resources composed for namespaced
// XWidgets.
type Namespaced struct {
	// ProviderConfigRef is the ProviderConfig the namespaced Widgets and
	// WidgetKeys use. Defaults to the ClusterProviderConfig named default.
	// +optional
	ProviderConfigRef *NamespacedProviderConfigReference `json:"providerConfigRef,omitempty"`
}

// A NamespacedProviderConfigReference names the ProviderConfig or
// ClusterProviderConfig that namespaced managed resources use.
type NamespacedProviderConfigReference struct {
	// Kind of the ProviderConfig: ProviderConfig (one in the XWidget's
	// namespace, which every namespace that has XWidgets then needs) or
	// ClusterProviderConfig. Defaults to ClusterProviderConfig.
	// +optional
	Kind ProviderConfigKind `json:"kind,omitempty"`

	// Name of the ProviderConfig. Defaults to default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// Legacy configures the managed resources composed for legacy XWidgets.
type Legacy struct {
	// ProviderConfigRef is the cluster-scoped widget.widgetco.io
	// ProviderConfig the cluster-scoped Widgets and WidgetKeys use. Defaults
	// to the one named default.
	// +optional
	ProviderConfigRef *LegacyProviderConfigReference `json:"providerConfigRef,omitempty"`

	// ConnectionSecretNamespace is the namespace where the cluster-scoped
	// WidgetKeys write their connection secrets, from which Crossplane copies
	// the endpoint and keys to the XWidget's and then the claim's connection
	// secret. Defaults to crossplane-system.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ConnectionSecretNamespace string `json:"connectionSecretNamespace,omitempty"`
}

// A LegacyProviderConfigReference names a cluster-scoped ProviderConfig.
type LegacyProviderConfigReference struct {
	// Name of the ProviderConfig. Defaults to default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// TTL says how long Crossplane may cache the function's response. Crossplane
// calls the function again when the TTL expires, and at once when the XWidget
// or one of its composed resources changes.
type TTL struct {
	// Converging is the TTL while the XWidget is not ready yet or has a
	// problem, such as 1m. Defaults to 1m. Crossplane calls the function
	// as soon as a composed resource changes (realtime compositions, on by
	// default), so this is a safety net: a short one makes a busy control
	// plane slower, each expiry being one more reconcile of every XWidget
	// that is not ready yet.
	// +optional
	Converging *metav1.Duration `json:"converging,omitempty"`

	// Ready is the TTL once the widget and its keys are ready, such as 10m.
	// Defaults to 10m.
	// +optional
	Ready *metav1.Duration `json:"ready,omitempty"`
}
