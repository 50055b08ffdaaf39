package apis_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// These tests read the CRDs that `go generate ./...` writes and check the
// properties that would otherwise break silently: a kind in the wrong group or
// scope, a version not served or stored, a conversion webhook missing, a
// missing printer column, a validation rule or enum that got lost.
// The expected rules and messages are spelled out here on purpose: changing
// one in the Go markers must be a deliberate change to this file too.

const crdDir = "../package/provider/crds"

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

// Versions of the API groups.
var (
	v1alpha1Only = []string{"v1alpha1"}
	v1beta1Only  = []string{"v1beta1"}
	bothVersions = []string{"v1alpha1", "v1beta1"}
)

// identity is what a CRD serves: its group, kind, scope, versions and how
// kubectl finds it.
type identity struct {
	Group      string
	Kind       string
	Plural     string
	Scope      extv1.ResourceScope
	Categories []string
	// Versions are all the CRD's versions, in its order.
	Versions []string
	// Served are the versions the API server serves.
	Served []string
	// Storage are the versions marked as the storage version: exactly one.
	Storage []string
	// Status are the versions with a status subresource.
	Status []string
}

// crdConversion is how the API server converts a CRD's objects between its
// versions.
type crdConversion struct {
	Strategy extv1.ConversionStrategyType
	// ServicePath is the path of the webhook's Service, which Crossplane's
	// package manager fills in; a webhook must not be given by URL.
	ServicePath    string
	URL            string
	ReviewVersions []string
}

var (
	// webhookConversion is the provider's conversion webhook
	// (controller-runtime's /convert handler).
	webhookConversion = crdConversion{Strategy: extv1.WebhookConverter, ServicePath: "/convert", ReviewVersions: []string{"v1"}}
	// noConversion is for CRDs of one version: the API server's default.
	noConversion = crdConversion{Strategy: extv1.NoneConverter}
)

type crdWant struct {
	identity   identity
	conversion crdConversion
	// columns are every version's printer columns.
	columns []column
}

// wantCRDs is every CRD the provider package must ship, by file name.
var wantCRDs = map[string]crdWant{
	"widget.m.widgetco.io_widgets.yaml": {
		identity:   identity{Group: "widget.m.widgetco.io", Kind: "Widget", Plural: "widgets", Scope: extv1.NamespaceScoped, Categories: managedCategories, Versions: bothVersions, Served: bothVersions, Storage: v1beta1Only, Status: bothVersions},
		conversion: webhookConversion,
		columns:    widgetColumns,
	},
	"widget.m.widgetco.io_widgetkeys.yaml": {
		identity:   identity{Group: "widget.m.widgetco.io", Kind: "WidgetKey", Plural: "widgetkeys", Scope: extv1.NamespaceScoped, Categories: managedCategories, Versions: bothVersions, Served: bothVersions, Storage: v1beta1Only, Status: bothVersions},
		conversion: webhookConversion,
		columns:    widgetKeyColumns,
	},
	"widget.m.widgetco.io_widgetinventories.yaml": {
		identity:   identity{Group: "widget.m.widgetco.io", Kind: "WidgetInventory", Plural: "widgetinventories", Scope: extv1.NamespaceScoped, Categories: managedCategories, Versions: v1beta1Only, Served: v1beta1Only, Storage: v1beta1Only, Status: v1beta1Only},
		conversion: noConversion,
		columns: []column{
			colReady, colSynced,
			{Name: "MATCHED", JSONPath: ".status.atProvider.matched"},
			{Name: "UNOWNED", JSONPath: ".status.atProvider.unowned"},
			{Name: "MANAGED", JSONPath: ".status.atProvider.managedHere"},
			colAge,
		},
	},
	"widget.m.widgetco.io_providerconfigs.yaml": {
		identity:   identity{Group: "widget.m.widgetco.io", Kind: "ProviderConfig", Plural: "providerconfigs", Scope: extv1.NamespaceScoped, Categories: providerConfigCategories, Versions: v1alpha1Only, Served: v1alpha1Only, Storage: v1alpha1Only, Status: v1alpha1Only},
		conversion: noConversion,
		columns:    localProviderConfigColumns,
	},
	"widget.m.widgetco.io_clusterproviderconfigs.yaml": {
		identity:   identity{Group: "widget.m.widgetco.io", Kind: "ClusterProviderConfig", Plural: "clusterproviderconfigs", Scope: extv1.ClusterScoped, Categories: providerConfigCategories, Versions: v1alpha1Only, Served: v1alpha1Only, Storage: v1alpha1Only, Status: v1alpha1Only},
		conversion: noConversion,
		columns:    clusterProviderConfigColumns,
	},
	"widget.m.widgetco.io_providerconfigusages.yaml": {
		identity:   identity{Group: "widget.m.widgetco.io", Kind: "ProviderConfigUsage", Plural: "providerconfigusages", Scope: extv1.NamespaceScoped, Categories: providerConfigCategories, Versions: v1alpha1Only, Served: v1alpha1Only, Storage: v1alpha1Only},
		conversion: noConversion,
		columns: []column{
			{Name: "CONFIG-KIND", JSONPath: ".providerConfigRef.kind"},
			{Name: "CONFIG-NAME", JSONPath: ".providerConfigRef.name"},
			{Name: "RESOURCE-KIND", JSONPath: ".resourceRef.kind"},
			{Name: "RESOURCE-NAME", JSONPath: ".resourceRef.name"},
			colAge,
		},
	},
	"widget.widgetco.io_widgets.yaml": {
		identity:   identity{Group: "widget.widgetco.io", Kind: "Widget", Plural: "widgets", Scope: extv1.ClusterScoped, Categories: managedCategories, Versions: bothVersions, Served: bothVersions, Storage: v1beta1Only, Status: bothVersions},
		conversion: webhookConversion,
		columns:    widgetColumns,
	},
	"widget.widgetco.io_widgetkeys.yaml": {
		identity:   identity{Group: "widget.widgetco.io", Kind: "WidgetKey", Plural: "widgetkeys", Scope: extv1.ClusterScoped, Categories: managedCategories, Versions: bothVersions, Served: bothVersions, Storage: v1beta1Only, Status: bothVersions},
		conversion: webhookConversion,
		columns:    widgetKeyColumns,
	},
	"widget.widgetco.io_providerconfigs.yaml": {
		identity:   identity{Group: "widget.widgetco.io", Kind: "ProviderConfig", Plural: "providerconfigs", Scope: extv1.ClusterScoped, Categories: providerConfigCategories, Versions: v1alpha1Only, Served: v1alpha1Only, Storage: v1alpha1Only, Status: v1alpha1Only},
		conversion: noConversion,
		columns:    clusterProviderConfigColumns,
	},
	"widget.widgetco.io_providerconfigusages.yaml": {
		identity:   identity{Group: "widget.widgetco.io", Kind: "ProviderConfigUsage", Plural: "providerconfigusages", Scope: extv1.ClusterScoped, Categories: providerConfigCategories, Versions: v1alpha1Only, Served: v1alpha1Only, Storage: v1alpha1Only},
		conversion: noConversion,
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

// versionOf returns the supplied version of crd, which must have a schema.
func versionOf(t *testing.T, crd *extv1.CustomResourceDefinition, version string) extv1.CustomResourceDefinitionVersion {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			t.Fatalf("%s: version %s has no schema", crd.GetName(), version)
		}
		return v
	}
	t.Fatalf("%s: no version %s", crd.GetName(), version)
	return extv1.CustomResourceDefinitionVersion{}
}

// schemaAt returns the schema of the supplied version of crd at the supplied
// property path.
func schemaAt(t *testing.T, crd *extv1.CustomResourceDefinition, version string, path ...string) extv1.JSONSchemaProps {
	t.Helper()
	s := *versionOf(t, crd, version).Schema.OpenAPIV3Schema
	for i, p := range path {
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("%s %s: no property %q at %v", crd.GetName(), version, p, path[:i])
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
				got.Versions = append(got.Versions, v.Name)
				if v.Served {
					got.Served = append(got.Served, v.Name)
				}
				if v.Storage {
					got.Storage = append(got.Storage, v.Name)
				}
				if v.Subresources != nil && v.Subresources.Status != nil {
					got.Status = append(got.Status, v.Name)
				}
			}
			if diff := cmp.Diff(want.identity, got); diff != "" {
				t.Errorf("group, kind, scope, categories, versions, served or storage versions or status subresources changed: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestCRDConversion checks that the CRDs with two versions are converted by
// the provider's conversion webhook, and that the others need none.
func TestCRDConversion(t *testing.T) {
	for file, want := range wantCRDs {
		t.Run(file, func(t *testing.T) {
			crd := loadCRD(t, file)
			got := noConversion
			if c := crd.Spec.Conversion; c != nil {
				got = crdConversion{Strategy: c.Strategy}
				if w := c.Webhook; w != nil {
					got.ReviewVersions = w.ConversionReviewVersions
					if cc := w.ClientConfig; cc != nil {
						got.URL = ptr.Deref(cc.URL, "")
						if cc.Service != nil {
							got.ServicePath = ptr.Deref(cc.Service.Path, "")
						}
					}
				}
			}
			if diff := cmp.Diff(want.conversion, got); diff != "" {
				t.Errorf("spec.conversion changed: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestCRDPrinterColumns(t *testing.T) {
	for file, want := range wantCRDs {
		t.Run(file, func(t *testing.T) {
			crd := loadCRD(t, file)
			wantColumns := map[string][]column{}
			for _, v := range want.identity.Versions {
				wantColumns[v] = want.columns
			}
			got := map[string][]column{}
			for _, v := range crd.Spec.Versions {
				got[v.Name] = []column{}
				for _, c := range v.AdditionalPrinterColumns {
					got[v.Name] = append(got[v.Name], column{Name: c.Name, JSONPath: c.JSONPath, Priority: c.Priority})
				}
			}
			if diff := cmp.Diff(wantColumns, got); diff != "" {
				t.Errorf("kubectl get columns of each version changed: -want, +got:\n%s", diff)
			}
		})
	}
}
