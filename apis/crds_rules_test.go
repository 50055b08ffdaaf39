package apis_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CEL rules and their messages, as users see them.
var (
	ruleRegionImmutable = extv1.ValidationRule{
		Rule:    "!has(oldSelf.region) || (has(self.region) && self.region == oldSelf.region)",
		Message: "region is immutable once set: delete and recreate the Widget to move it to another region",
	}
	ruleSizeRequired = extv1.ValidationRule{
		Rule:    "(has(self.managementPolicies) && !('*' in self.managementPolicies || 'Create' in self.managementPolicies || 'Update' in self.managementPolicies)) || has(self.forProvider.size) || (has(self.initProvider) && has(self.initProvider.size))",
		Message: "spec.forProvider.size is required (small, medium or large), or spec.initProvider.size to set it only at creation; only an observe-only resource (managementPolicies: [Observe]) can leave it unset",
	}
	ruleLabelKeys = extv1.ValidationRule{
		Rule:    "self.all(k, k.matches('^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$'))",
		Message: "label keys must be 1 to 63 characters of lowercase letters, digits, '.', '_', '-' and '/', starting and ending with a letter or digit",
	}
	ruleLabelKeysReserved = extv1.ValidationRule{
		Rule:    "self.all(k, !k.startsWith('widgetco.io/'))",
		Message: "label keys with the prefix widgetco.io/ are reserved for the provider's ownership marker: use another prefix",
	}
	ruleLabelValues = extv1.ValidationRule{
		Rule:    "self.all(k, size(self[k]) <= 63)",
		Message: "label values must be at most 63 characters",
	}
	ruleDescriptionPrintable = extv1.ValidationRule{
		Rule:    `self.matches(r'^[\p{L}\p{M}\p{N}\p{P}\p{S} \t\n]*$')`,
		Message: "description must hold only printable characters, spaces, tabs and newlines",
	}
	ruleInventorySelectsOwnLabels = extv1.ValidationRule{
		Rule:    "self.all(k, !k.startsWith('widgetco.io/'))",
		Message: "labels with the prefix widgetco.io/ are the provider's ownership markers; select widgets by their own labels",
	}
	ruleProviderConfigKind = extv1.ValidationRule{
		Rule:    "!has(self.providerConfigRef) || self.providerConfigRef.kind in ['ProviderConfig', 'ClusterProviderConfig']",
		Message: "providerConfigRef.kind must be ProviderConfig (a ProviderConfig in this namespace) or ClusterProviderConfig",
	}
	ruleKeyNamesWidget = extv1.ValidationRule{
		Rule:    "has(self.widgetName) || has(self.widgetNameRef) || has(self.widgetNameSelector)",
		Message: "set widgetName, widgetNameRef or widgetNameSelector to say which widget the key belongs to",
	}
	ruleWidgetNameImmutable = extv1.ValidationRule{
		Rule:    "!has(oldSelf.widgetName) || (has(self.widgetName) && self.widgetName == oldSelf.widgetName)",
		Message: "widgetName is immutable once set: a key cannot move to another widget; delete and recreate the WidgetKey",
	}
	ruleKeyDescriptionImmutable = extv1.ValidationRule{
		Rule:    "!has(oldSelf.description) || (has(self.description) && self.description == oldSelf.description)",
		Message: "description is immutable once set: the Widget API cannot change a key; delete and recreate the WidgetKey",
	}
	ruleKeyRefLocal = extv1.ValidationRule{
		Rule:    "!has(self.widgetNameRef) || !has(self.widgetNameRef.__namespace__) || size(self.widgetNameRef.__namespace__) == 0 || (has(self.widgetNameSelector) && has(self.widgetName))",
		Message: "widgetNameRef.namespace must not be set: a WidgetKey can reference only Widgets in its own namespace (Crossplane sets it, together with widgetName, when it resolves widgetNameSelector)",
	}
	ruleKeySelectorLocal = extv1.ValidationRule{
		Rule:    "!has(self.widgetNameSelector) || !has(self.widgetNameSelector.__namespace__) || size(self.widgetNameSelector.__namespace__) == 0",
		Message: "widgetNameSelector.namespace must not be set: a WidgetKey can select only Widgets in its own namespace",
	}
	ruleRotationNeedsSecret = extv1.ValidationRule{
		Rule:    "!has(self.forProvider.rotation) || has(self.writeConnectionSecretToRef)",
		Message: "spec.forProvider.rotation needs spec.writeConnectionSecretToRef: a rotated key's secret is published only in the connection Secret",
	}
	ruleRotationNeedsCreateDelete = extv1.ValidationRule{
		Rule:    "!has(self.forProvider.rotation) || !has(self.managementPolicies) || '*' in self.managementPolicies || ('Create' in self.managementPolicies && 'Update' in self.managementPolicies && 'Delete' in self.managementPolicies)",
		Message: "spec.forProvider.rotation needs managementPolicies that include Create, Update and Delete (or '*'): rotating creates a new key, updates the connection Secret and revokes the previous key",
	}
	ruleOverlapShorterThanPeriod = extv1.ValidationRule{
		Rule:    "!has(self.period) || duration(self.overlap) < duration(self.period)",
		Message: "overlap must be shorter than period: the previous key is revoked overlap after a rotation, before the next rotation is due",
	}
	rulePeriodMin = extv1.ValidationRule{
		Rule:    "duration(self) >= duration('1h')",
		Message: "period must be at least 1h: rotating more often costs every consumer a reload and buys no security",
	}
	rulePeriodMax = extv1.ValidationRule{
		Rule:    "duration(self) <= duration('87600h')",
		Message: "period must be at most 87600h (ten years)",
	}
	ruleOverlapMin = extv1.ValidationRule{
		Rule:    "duration(self) >= duration('5m')",
		Message: "overlap must be at least 5m: consumers need time to read the new key from the connection Secret before the previous key is revoked",
	}
	ruleOverlapMax = extv1.ValidationRule{
		Rule:    "duration(self) <= duration('87600h')",
		Message: "overlap must be at most 87600h (ten years)",
	}
	ruleEndpointHost = extv1.ValidationRule{
		Rule:    "isURL(self) && size(url(self).getHostname()) > 0",
		Message: "endpoint must be an absolute URL with a host, such as https://widgets.example.com",
	}
	ruleCABundlePEM = extv1.ValidationRule{
		Rule:    "self.contains('-----BEGIN CERTIFICATE-----')",
		Message: "caBundle must hold one or more PEM-encoded certificates (-----BEGIN CERTIFICATE----- blocks)",
	}
	ruleSecretRefRequired = extv1.ValidationRule{
		Rule:    "self.source != 'Secret' || has(self.secretRef)",
		Message: "secretRef is required when source is Secret: name the Secret, its namespace and the key that holds the Widget API token",
	}
	ruleFsRequired = extv1.ValidationRule{
		Rule:    "self.source != 'Filesystem' || has(self.fs)",
		Message: "fs is required when source is Filesystem: name the token file, such as a projected ServiceAccount token",
	}
	ruleLocalSecretRefRequired = extv1.ValidationRule{
		Rule:    "self.source != 'Secret' || has(self.secretRef)",
		Message: "secretRef is required when source is Secret: name the Secret in this namespace and the key that holds the Widget API token",
	}
)

// rulesIn returns every x-kubernetes-validations of s and the schemas in it,
// by property path ("." for s itself, "spec.forProvider" below it; ".*" for a
// map's values and "[*]" for a list's items).
func rulesIn(s extv1.JSONSchemaProps) map[string]extv1.ValidationRules {
	out := map[string]extv1.ValidationRules{}
	var walk func(s extv1.JSONSchemaProps, path string)
	walk = func(s extv1.JSONSchemaProps, path string) {
		if len(s.XValidations) > 0 {
			out[path] = s.XValidations
		}
		for name, p := range s.Properties {
			if path == "." {
				walk(p, name)
				continue
			}
			walk(p, path+"."+name)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(*s.AdditionalProperties.Schema, path+".*")
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(*s.Items.Schema, path+"[*]")
		}
	}
	walk(s, ".")
	return out
}

// TestCRDValidationRules checks every CEL rule of every version of every
// CRD: a rule that got lost, and a rule left behind where a field used to
// be, are both changes.
func TestCRDValidationRules(t *testing.T) {
	labelRules := extv1.ValidationRules{ruleLabelKeys, ruleLabelKeysReserved, ruleLabelValues}
	printable := extv1.ValidationRules{ruleDescriptionPrintable}
	cases := map[string]struct {
		reason  string
		file    string
		version string
		want    map[string]extv1.ValidationRules
	}{
		"NamespacedWidgetV1alpha1": {
			reason:  "A v1alpha1 namespaced Widget may only use a ProviderConfig or a ClusterProviderConfig, cannot change or remove its region, and must have labels and a description the Widget API accepts.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec":                         {ruleProviderConfigKind},
				"spec.forProvider":             {ruleRegionImmutable},
				"spec.forProvider.labels":      labelRules,
				"spec.forProvider.description": printable,
			},
		},
		"NamespacedWidgetV1beta1": {
			reason: "A v1beta1 namespaced Widget needs a size unless it only observes, may only use a ProviderConfig or a ClusterProviderConfig, " +
				"cannot change or remove its region, now in initProvider, and must have labels and descriptions the Widget API accepts in forProvider and initProvider.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			version: "v1beta1",
			want: map[string]extv1.ValidationRules{
				"spec":                          {ruleSizeRequired, ruleProviderConfigKind},
				"spec.forProvider.labels":       labelRules,
				"spec.forProvider.description":  printable,
				"spec.initProvider":             {ruleRegionImmutable},
				"spec.initProvider.labels":      labelRules,
				"spec.initProvider.description": printable,
			},
		},
		"ClusterWidgetV1alpha1": {
			reason:  "A v1alpha1 cluster-scoped Widget cannot change or remove its region, and must have labels and a description the Widget API accepts.",
			file:    "widget.widgetco.io_widgets.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec.forProvider":             {ruleRegionImmutable},
				"spec.forProvider.labels":      labelRules,
				"spec.forProvider.description": printable,
			},
		},
		"ClusterWidgetV1beta1": {
			reason: "A v1beta1 cluster-scoped Widget needs a size unless it only observes, cannot change or remove its region, now in initProvider, " +
				"and must have labels and descriptions the Widget API accepts in forProvider and initProvider.",
			file:    "widget.widgetco.io_widgets.yaml",
			version: "v1beta1",
			want: map[string]extv1.ValidationRules{
				"spec":                          {ruleSizeRequired},
				"spec.forProvider.labels":       labelRules,
				"spec.forProvider.description":  printable,
				"spec.initProvider":             {ruleRegionImmutable},
				"spec.initProvider.labels":      labelRules,
				"spec.initProvider.description": printable,
			},
		},
		"NamespacedWidgetKeyV1alpha1": {
			reason:  "A v1alpha1 namespaced WidgetKey must name its widget in its own namespace and keep it, keep its description, and use a ProviderConfig or a ClusterProviderConfig.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec":                         {ruleProviderConfigKind},
				"spec.forProvider":             {ruleKeyNamesWidget, ruleWidgetNameImmutable, ruleKeyDescriptionImmutable, ruleKeyRefLocal, ruleKeySelectorLocal},
				"spec.forProvider.description": printable,
			},
		},
		"NamespacedWidgetKeyV1beta1": {
			reason:  "A v1beta1 namespaced WidgetKey must name its widget in its own namespace and keep it, keep its description, now in initProvider, use a ProviderConfig or a ClusterProviderConfig, and rotate only with sane periods, a connection Secret and Create, Update and Delete.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			version: "v1beta1",
			want: map[string]extv1.ValidationRules{
				"spec":                              {ruleRotationNeedsSecret, ruleRotationNeedsCreateDelete, ruleProviderConfigKind},
				"spec.forProvider":                  {ruleKeyNamesWidget, ruleWidgetNameImmutable, ruleKeyRefLocal, ruleKeySelectorLocal},
				"spec.forProvider.rotation":         {ruleOverlapShorterThanPeriod},
				"spec.forProvider.rotation.period":  {rulePeriodMin, rulePeriodMax},
				"spec.forProvider.rotation.overlap": {ruleOverlapMin, ruleOverlapMax},
				"spec.initProvider":                 {ruleKeyDescriptionImmutable},
				"spec.initProvider.description":     printable,
			},
		},
		"ClusterWidgetKeyV1alpha1": {
			reason:  "A v1alpha1 cluster-scoped WidgetKey must name its widget and keep it, and keep its description.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec.forProvider":             {ruleKeyNamesWidget, ruleWidgetNameImmutable, ruleKeyDescriptionImmutable},
				"spec.forProvider.description": printable,
			},
		},
		"ClusterWidgetKeyV1beta1": {
			reason:  "A v1beta1 cluster-scoped WidgetKey must name its widget and keep it, keep its description, now in initProvider, and rotate only with sane periods, a connection Secret and Create, Update and Delete.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			version: "v1beta1",
			want: map[string]extv1.ValidationRules{
				"spec":                              {ruleRotationNeedsSecret, ruleRotationNeedsCreateDelete},
				"spec.forProvider":                  {ruleKeyNamesWidget, ruleWidgetNameImmutable},
				"spec.forProvider.rotation":         {ruleOverlapShorterThanPeriod},
				"spec.forProvider.rotation.period":  {rulePeriodMin, rulePeriodMax},
				"spec.forProvider.rotation.overlap": {ruleOverlapMin, ruleOverlapMax},
				"spec.initProvider":                 {ruleKeyDescriptionImmutable},
				"spec.initProvider.description":     printable,
			},
		},
		"NamespacedProviderConfig": {
			reason:  "An endpoint without a host, a CA bundle that is not PEM and Secret credentials that do not name the Secret in this namespace must be rejected.",
			file:    "widget.m.widgetco.io_providerconfigs.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec.endpoint":    {ruleEndpointHost},
				"spec.caBundle":    {ruleCABundlePEM},
				"spec.credentials": {ruleLocalSecretRefRequired},
			},
		},
		"ClusterProviderConfig": {
			reason:  "An endpoint without a host, a CA bundle that is not PEM, Secret credentials that do not name the Secret and Filesystem credentials that name no file must be rejected.",
			file:    "widget.m.widgetco.io_clusterproviderconfigs.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec.endpoint":    {ruleEndpointHost},
				"spec.caBundle":    {ruleCABundlePEM},
				"spec.credentials": {ruleSecretRefRequired, ruleFsRequired},
			},
		},
		"LegacyProviderConfig": {
			reason:  "An endpoint without a host, a CA bundle that is not PEM, Secret credentials that do not name the Secret and Filesystem credentials that name no file must be rejected.",
			file:    "widget.widgetco.io_providerconfigs.yaml",
			version: "v1alpha1",
			want: map[string]extv1.ValidationRules{
				"spec.endpoint":    {ruleEndpointHost},
				"spec.caBundle":    {ruleCABundlePEM},
				"spec.credentials": {ruleSecretRefRequired, ruleFsRequired},
			},
		},
		"WidgetInventory": {
			reason:  "A WidgetInventory selects by the widgets' own labels and names a ProviderConfig kind of its namespace's group.",
			file:    "widget.m.widgetco.io_widgetinventories.yaml",
			version: "v1beta1",
			want: map[string]extv1.ValidationRules{
				"spec":                         {ruleProviderConfigKind},
				"spec.forProvider.matchLabels": {ruleInventorySelectsOwnLabels},
			},
		},
		"NamespacedProviderConfigUsage": {
			reason:  "Crossplane writes ProviderConfigUsages; they have no rules.",
			file:    "widget.m.widgetco.io_providerconfigusages.yaml",
			version: "v1alpha1",
		},
		"LegacyProviderConfigUsage": {
			reason:  "Crossplane writes ProviderConfigUsages; they have no rules.",
			file:    "widget.widgetco.io_providerconfigusages.yaml",
			version: "v1alpha1",
		},
	}
	covered := map[string]bool{}
	for name, tc := range cases {
		covered[tc.file+" "+tc.version] = true
		t.Run(name, func(t *testing.T) {
			got := rulesIn(schemaAt(t, loadCRD(t, tc.file), tc.version))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nx-kubernetes-validations by path: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	for file, want := range wantCRDs {
		for _, v := range want.identity.Versions {
			if !covered[file+" "+v] {
				t.Errorf("%s: version %s has no case here: every version's rules must be checked", file, v)
			}
		}
	}
}
