package apis_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// These tests read the CRDs that `go generate ./...` writes and check the
// properties that would otherwise break silently: a kind in the wrong group or
// scope, a missing printer column, a validation rule or enum that got lost.
// The expected rules and messages are spelled out here on purpose: changing
// one in the Go markers must be a deliberate change to this file too.

const crdDir = "../package/provider/crds"

// CEL rules and their messages, as users see them.
var (
	ruleRegionImmutable = extv1.ValidationRule{
		Rule:    "!has(oldSelf.region) || (has(self.region) && self.region == oldSelf.region)",
		Message: "region is immutable once set: delete and recreate the Widget to move it to another region",
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
		Rule:    "!has(self.widgetNameRef) || !has(self.widgetNameRef.__namespace__) || size(self.widgetNameRef.__namespace__) == 0 || has(self.widgetNameSelector)",
		Message: "widgetNameRef.namespace must not be set: a WidgetKey can reference only Widgets in its own namespace (Crossplane sets it itself when it resolves widgetNameSelector)",
	}
	ruleKeySelectorLocal = extv1.ValidationRule{
		Rule:    "!has(self.widgetNameSelector) || !has(self.widgetNameSelector.__namespace__) || size(self.widgetNameSelector.__namespace__) == 0",
		Message: "widgetNameSelector.namespace must not be set: a WidgetKey can select only Widgets in its own namespace",
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
	ruleLocalSecretRefRequired = extv1.ValidationRule{
		Rule:    "self.source != 'Secret' || has(self.secretRef)",
		Message: "secretRef is required when source is Secret: name the Secret in this namespace and the key that holds the Widget API token",
	}
)

type column struct {
	Name     string
	JSONPath string
	Priority int32
}

var (
	colReady        = column{Name: "READY", JSONPath: ".status.conditions[?(@.type=='Ready')].status"}
	colSynced       = column{Name: "SYNCED", JSONPath: ".status.conditions[?(@.type=='Synced')].status"}
	colExternalName = column{Name: "EXTERNAL-NAME", JSONPath: `.metadata.annotations.crossplane\.io/external-name`}
	colAge          = column{Name: "AGE", JSONPath: ".metadata.creationTimestamp"}

	widgetColumns = []column{
		colReady, colSynced, colExternalName,
		{Name: "SIZE", JSONPath: ".status.atProvider.size"},
		{Name: "STATE", JSONPath: ".status.atProvider.state"},
		{Name: "REGION", JSONPath: ".status.atProvider.region", Priority: 1},
		{Name: "ENDPOINT", JSONPath: ".status.atProvider.endpoint", Priority: 1},
		colAge,
	}
	widgetKeyColumns = []column{
		colReady, colSynced, colExternalName,
		{Name: "WIDGET", JSONPath: ".spec.forProvider.widgetName"},
		colAge,
	}
	localProviderConfigColumns = []column{
		{Name: "ENDPOINT", JSONPath: ".spec.endpoint"},
		{Name: "SECRET-NAME", JSONPath: ".spec.credentials.secretRef.name", Priority: 1},
		{Name: "USERS", JSONPath: ".status.users", Priority: 1},
		colAge,
	}
	clusterProviderConfigColumns = []column{
		{Name: "ENDPOINT", JSONPath: ".spec.endpoint"},
		{Name: "SECRET-NAME", JSONPath: ".spec.credentials.secretRef.name", Priority: 1},
		{Name: "SECRET-NAMESPACE", JSONPath: ".spec.credentials.secretRef.namespace", Priority: 1},
		{Name: "USERS", JSONPath: ".status.users", Priority: 1},
		colAge,
	}
)

var (
	managedCategories        = []string{"crossplane", "managed", "widget"}
	providerConfigCategories = []string{"crossplane", "providerconfig", "widget"}
)

// identity is what a CRD serves: its group, kind, scope and how kubectl finds
// it.
type identity struct {
	Group      string
	Kind       string
	Plural     string
	Scope      extv1.ResourceScope
	Categories []string
	Versions   []string
	Status     bool
}

type crdWant struct {
	identity identity
	columns  []column
}

// wantCRDs is every CRD the provider package must ship, by file name.
var wantCRDs = map[string]crdWant{
	"widget.m.widgetco.io_widgets.yaml": {
		identity: identity{Group: "widget.m.widgetco.io", Kind: "Widget", Plural: "widgets", Scope: extv1.NamespaceScoped, Categories: managedCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  widgetColumns,
	},
	"widget.m.widgetco.io_widgetkeys.yaml": {
		identity: identity{Group: "widget.m.widgetco.io", Kind: "WidgetKey", Plural: "widgetkeys", Scope: extv1.NamespaceScoped, Categories: managedCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  widgetKeyColumns,
	},
	"widget.m.widgetco.io_providerconfigs.yaml": {
		identity: identity{Group: "widget.m.widgetco.io", Kind: "ProviderConfig", Plural: "providerconfigs", Scope: extv1.NamespaceScoped, Categories: providerConfigCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  localProviderConfigColumns,
	},
	"widget.m.widgetco.io_clusterproviderconfigs.yaml": {
		identity: identity{Group: "widget.m.widgetco.io", Kind: "ClusterProviderConfig", Plural: "clusterproviderconfigs", Scope: extv1.ClusterScoped, Categories: providerConfigCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  clusterProviderConfigColumns,
	},
	"widget.m.widgetco.io_providerconfigusages.yaml": {
		identity: identity{Group: "widget.m.widgetco.io", Kind: "ProviderConfigUsage", Plural: "providerconfigusages", Scope: extv1.NamespaceScoped, Categories: providerConfigCategories, Versions: []string{"v1alpha1"}},
		columns: []column{
			{Name: "CONFIG-KIND", JSONPath: ".providerConfigRef.kind"},
			{Name: "CONFIG-NAME", JSONPath: ".providerConfigRef.name"},
			{Name: "RESOURCE-KIND", JSONPath: ".resourceRef.kind"},
			{Name: "RESOURCE-NAME", JSONPath: ".resourceRef.name"},
			colAge,
		},
	},
	"widget.widgetco.io_widgets.yaml": {
		identity: identity{Group: "widget.widgetco.io", Kind: "Widget", Plural: "widgets", Scope: extv1.ClusterScoped, Categories: managedCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  widgetColumns,
	},
	"widget.widgetco.io_widgetkeys.yaml": {
		identity: identity{Group: "widget.widgetco.io", Kind: "WidgetKey", Plural: "widgetkeys", Scope: extv1.ClusterScoped, Categories: managedCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  widgetKeyColumns,
	},
	"widget.widgetco.io_providerconfigs.yaml": {
		identity: identity{Group: "widget.widgetco.io", Kind: "ProviderConfig", Plural: "providerconfigs", Scope: extv1.ClusterScoped, Categories: providerConfigCategories, Versions: []string{"v1alpha1"}, Status: true},
		columns:  clusterProviderConfigColumns,
	},
	"widget.widgetco.io_providerconfigusages.yaml": {
		identity: identity{Group: "widget.widgetco.io", Kind: "ProviderConfigUsage", Plural: "providerconfigusages", Scope: extv1.ClusterScoped, Categories: providerConfigCategories, Versions: []string{"v1alpha1"}},
		columns: []column{
			{Name: "CONFIG-NAME", JSONPath: ".providerConfigRef.name"},
			{Name: "RESOURCE-KIND", JSONPath: ".resourceRef.kind"},
			{Name: "RESOURCE-NAME", JSONPath: ".resourceRef.name"},
			colAge,
		},
	},
}

func loadCRD(t *testing.T, file string) *extv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(crdDir, file))
	if err != nil {
		t.Fatalf("cannot read CRD (run go generate ./...): %v", err)
	}
	crd := &extv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatalf("cannot parse CRD %s: %v", file, err)
	}
	return crd
}

// schemaAt returns the schema of the only version of crd at the supplied
// property path.
func schemaAt(t *testing.T, crd *extv1.CustomResourceDefinition, path ...string) extv1.JSONSchemaProps {
	t.Helper()
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		t.Fatalf("%s: want exactly one version with a schema", crd.GetName())
	}
	s := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for i, p := range path {
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("%s: no property %q at %v", crd.GetName(), p, path[:i])
		}
		s = next
	}
	return s
}

func TestCRDFiles(t *testing.T) {
	entries, err := os.ReadDir(crdDir)
	if err != nil {
		t.Fatalf("cannot read %s (run go generate ./...): %v", crdDir, err)
	}
	got := make([]string, 0, len(entries))
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := make([]string, 0, len(wantCRDs))
	for f := range wantCRDs {
		want = append(want, f)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("%s should hold exactly the provider's CRDs, with no stale ones: -want, +got:\n%s", crdDir, diff)
	}
}

func TestCRDIdentity(t *testing.T) {
	for file, want := range wantCRDs {
		t.Run(file, func(t *testing.T) {
			crd := loadCRD(t, file)
			got := identity{
				Group:      crd.Spec.Group,
				Kind:       crd.Spec.Names.Kind,
				Plural:     crd.Spec.Names.Plural,
				Scope:      crd.Spec.Scope,
				Categories: crd.Spec.Names.Categories,
			}
			for _, v := range crd.Spec.Versions {
				if v.Served && v.Storage {
					got.Versions = append(got.Versions, v.Name)
				}
				if v.Subresources != nil && v.Subresources.Status != nil {
					got.Status = true
				}
			}
			if diff := cmp.Diff(want.identity, got); diff != "" {
				t.Errorf("group, kind, scope, categories, served storage versions or status subresource changed: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestCRDPrinterColumns(t *testing.T) {
	for file, want := range wantCRDs {
		t.Run(file, func(t *testing.T) {
			crd := loadCRD(t, file)
			var got []column
			for _, v := range crd.Spec.Versions {
				for _, c := range v.AdditionalPrinterColumns {
					got = append(got, column{Name: c.Name, JSONPath: c.JSONPath, Priority: c.Priority})
				}
			}
			if diff := cmp.Diff(want.columns, got); diff != "" {
				t.Errorf("kubectl get columns changed: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestCRDValidationRules(t *testing.T) {
	cases := map[string]struct {
		reason string
		file   string
		path   []string
		want   extv1.ValidationRules
	}{
		"NamespacedWidgetRegionImmutable": {
			reason: "Changing or removing a namespaced Widget's region must be rejected.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider"},
			want:   extv1.ValidationRules{ruleRegionImmutable},
		},
		"ClusterWidgetRegionImmutable": {
			reason: "Changing or removing a cluster-scoped Widget's region must be rejected.",
			file:   "widget.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider"},
			want:   extv1.ValidationRules{ruleRegionImmutable},
		},
		"NamespacedWidgetLabels": {
			reason: "Invalid or reserved label keys and long label values must be rejected.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider", "labels"},
			want:   extv1.ValidationRules{ruleLabelKeys, ruleLabelKeysReserved, ruleLabelValues},
		},
		"ClusterWidgetLabels": {
			reason: "Invalid or reserved label keys and long label values must be rejected.",
			file:   "widget.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider", "labels"},
			want:   extv1.ValidationRules{ruleLabelKeys, ruleLabelKeysReserved, ruleLabelValues},
		},
		"NamespacedWidgetDescription": {
			reason: "A description the Widget API would reject as unprintable must be rejected.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider", "description"},
			want:   extv1.ValidationRules{ruleDescriptionPrintable},
		},
		"ClusterWidgetDescription": {
			reason: "A description the Widget API would reject as unprintable must be rejected.",
			file:   "widget.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider", "description"},
			want:   extv1.ValidationRules{ruleDescriptionPrintable},
		},
		"NamespacedWidgetKeyDescription": {
			reason: "A description the Widget API would reject as unprintable must be rejected.",
			file:   "widget.m.widgetco.io_widgetkeys.yaml",
			path:   []string{"spec", "forProvider", "description"},
			want:   extv1.ValidationRules{ruleDescriptionPrintable},
		},
		"ClusterWidgetKeyDescription": {
			reason: "A description the Widget API would reject as unprintable must be rejected.",
			file:   "widget.widgetco.io_widgetkeys.yaml",
			path:   []string{"spec", "forProvider", "description"},
			want:   extv1.ValidationRules{ruleDescriptionPrintable},
		},
		"NamespacedWidgetProviderConfigKind": {
			reason: "A namespaced Widget may only use a ProviderConfig or a ClusterProviderConfig.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			path:   []string{"spec"},
			want:   extv1.ValidationRules{ruleProviderConfigKind},
		},
		"NamespacedWidgetKey": {
			reason: "A namespaced WidgetKey must name its widget in its own namespace and keep it.",
			file:   "widget.m.widgetco.io_widgetkeys.yaml",
			path:   []string{"spec", "forProvider"},
			want:   extv1.ValidationRules{ruleKeyNamesWidget, ruleWidgetNameImmutable, ruleKeyDescriptionImmutable, ruleKeyRefLocal, ruleKeySelectorLocal},
		},
		"NamespacedWidgetKeyProviderConfigKind": {
			reason: "A namespaced WidgetKey may only use a ProviderConfig or a ClusterProviderConfig.",
			file:   "widget.m.widgetco.io_widgetkeys.yaml",
			path:   []string{"spec"},
			want:   extv1.ValidationRules{ruleProviderConfigKind},
		},
		"ClusterWidgetKey": {
			reason: "A cluster-scoped WidgetKey must name its widget and keep it.",
			file:   "widget.widgetco.io_widgetkeys.yaml",
			path:   []string{"spec", "forProvider"},
			want:   extv1.ValidationRules{ruleKeyNamesWidget, ruleWidgetNameImmutable, ruleKeyDescriptionImmutable},
		},
		"NamespacedProviderConfigEndpoint": {
			reason: "An endpoint without a host must be rejected.",
			file:   "widget.m.widgetco.io_providerconfigs.yaml",
			path:   []string{"spec", "endpoint"},
			want:   extv1.ValidationRules{ruleEndpointHost},
		},
		"NamespacedProviderConfigCABundle": {
			reason: "A CA bundle that is not PEM must be rejected.",
			file:   "widget.m.widgetco.io_providerconfigs.yaml",
			path:   []string{"spec", "caBundle"},
			want:   extv1.ValidationRules{ruleCABundlePEM},
		},
		"NamespacedProviderConfigCredentials": {
			reason: "Secret credentials must say which Secret key holds the token.",
			file:   "widget.m.widgetco.io_providerconfigs.yaml",
			path:   []string{"spec", "credentials"},
			want:   extv1.ValidationRules{ruleLocalSecretRefRequired},
		},
		"ClusterProviderConfigEndpoint": {
			reason: "An endpoint without a host must be rejected.",
			file:   "widget.m.widgetco.io_clusterproviderconfigs.yaml",
			path:   []string{"spec", "endpoint"},
			want:   extv1.ValidationRules{ruleEndpointHost},
		},
		"ClusterProviderConfigCredentials": {
			reason: "Secret credentials must say which Secret key holds the token.",
			file:   "widget.m.widgetco.io_clusterproviderconfigs.yaml",
			path:   []string{"spec", "credentials"},
			want:   extv1.ValidationRules{ruleSecretRefRequired},
		},
		"LegacyProviderConfigCABundle": {
			reason: "A CA bundle that is not PEM must be rejected.",
			file:   "widget.widgetco.io_providerconfigs.yaml",
			path:   []string{"spec", "caBundle"},
			want:   extv1.ValidationRules{ruleCABundlePEM},
		},
		"LegacyProviderConfigCredentials": {
			reason: "Secret credentials must say which Secret key holds the token.",
			file:   "widget.widgetco.io_providerconfigs.yaml",
			path:   []string{"spec", "credentials"},
			want:   extv1.ValidationRules{ruleSecretRefRequired},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := schemaAt(t, loadCRD(t, tc.file), tc.path...).XValidations
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nx-kubernetes-validations at %v: -want, +got:\n%s", tc.reason, tc.path, diff)
			}
		})
	}
}

// constraints are the OpenAPI constraints of one schema.
type constraints struct {
	Type          string
	Enum          []string
	Pattern       string
	MaxLength     *int64
	MaxProperties *int64
	Default       string
	Required      []string
	Properties    []string
}
