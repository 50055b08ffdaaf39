package apis_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

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

func constraintsOf(s extv1.JSONSchemaProps) constraints {
	c := constraints{
		Type:          s.Type,
		Pattern:       s.Pattern,
		MaxLength:     s.MaxLength,
		MaxProperties: s.MaxProperties,
		Required:      s.Required,
	}
	for _, e := range s.Enum {
		c.Enum = append(c.Enum, string(e.Raw))
	}
	if s.Default != nil {
		c.Default = string(s.Default.Raw)
	}
	for p := range s.Properties {
		c.Properties = append(c.Properties, p)
	}
	slices.Sort(c.Properties)
	return c
}

func TestCRDFieldConstraints(t *testing.T) {
	size := constraints{Type: "string", Enum: []string{`"small"`, `"medium"`, `"large"`}}
	region := constraints{Type: "string", Pattern: `^[a-z]+(-[a-z]+)*-[0-9]+$`, MaxLength: ptr.To[int64](32)}
	labels := constraints{Type: "object", MaxProperties: ptr.To[int64](31)}
	description := constraints{Type: "string", MaxLength: ptr.To[int64](256)}
	widgetName := constraints{Type: "string", Pattern: `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`, MaxLength: ptr.To[int64](63)}
	endpoint := constraints{Type: "string", Pattern: `^https?://`, MaxLength: ptr.To[int64](2048)}
	source := constraints{Type: "string", Enum: []string{`"Secret"`}}
	// Only a platform team's (cluster-scoped) ProviderConfigs may read a
	// token file.
	clusterSource := constraints{Type: "string", Enum: []string{`"Secret"`, `"Filesystem"`}}
	tokenFilePath := constraints{Type: "string", Pattern: "^/", MaxLength: ptr.To[int64](1024)}

	type field struct {
		path []string
		want constraints
	}
	v1beta1Widget := []field{
		{path: []string{"spec", "forProvider", "size"}, want: size},
		{path: []string{"spec", "forProvider", "labels"}, want: labels},
		{path: []string{"spec", "forProvider", "description"}, want: description},
		{path: []string{"spec", "initProvider", "region"}, want: region},
		{path: []string{"spec", "initProvider", "size"}, want: size},
		{path: []string{"spec", "initProvider", "labels"}, want: labels},
		{path: []string{"spec", "initProvider", "description"}, want: description},
	}
	v1beta1WidgetKey := []field{
		{path: []string{"spec", "forProvider", "widgetName"}, want: widgetName},
		{path: []string{"spec", "initProvider", "description"}, want: description},
	}
	cases := map[string]struct {
		reason  string
		file    string
		version string
		fields  []field
	}{
		"NamespacedWidgetV1alpha1": {
			reason:  "A namespaced Widget's forProvider must be validated as the Widget API validates a widget.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "forProvider", "size"}, want: size},
				{path: []string{"spec", "forProvider", "region"}, want: region},
				{path: []string{"spec", "forProvider", "labels"}, want: labels},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"ClusterWidgetV1alpha1": {
			reason:  "A cluster-scoped Widget's forProvider must be validated as the Widget API validates a widget.",
			file:    "widget.widgetco.io_widgets.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "forProvider", "size"}, want: size},
				{path: []string{"spec", "forProvider", "region"}, want: region},
				{path: []string{"spec", "forProvider", "labels"}, want: labels},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"NamespacedWidgetV1beta1": {
			reason:  "A v1beta1 namespaced Widget's forProvider and initProvider must be validated as the Widget API validates a widget.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			version: "v1beta1",
			fields:  v1beta1Widget,
		},
		"ClusterWidgetV1beta1": {
			reason:  "A v1beta1 cluster-scoped Widget's forProvider and initProvider must be validated as the Widget API validates a widget.",
			file:    "widget.widgetco.io_widgets.yaml",
			version: "v1beta1",
			fields:  v1beta1Widget,
		},
		"NamespacedWidgetKeyV1alpha1": {
			reason:  "A namespaced WidgetKey's widget name must be a valid widget name.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "forProvider", "widgetName"}, want: widgetName},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"ClusterWidgetKeyV1alpha1": {
			reason:  "A cluster-scoped WidgetKey's widget name must be a valid widget name.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "forProvider", "widgetName"}, want: widgetName},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"NamespacedWidgetKeyV1beta1": {
			reason:  "A v1beta1 namespaced WidgetKey's widget name must be a valid widget name.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			version: "v1beta1",
			fields:  v1beta1WidgetKey,
		},
		"ClusterWidgetKeyV1beta1": {
			reason:  "A v1beta1 cluster-scoped WidgetKey's widget name must be a valid widget name.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			version: "v1beta1",
			fields:  v1beta1WidgetKey,
		},
		"NamespacedProviderConfig": {
			reason:  "A namespaced ProviderConfig must name a Secret in its own namespace: its secretRef has no namespace.",
			file:    "widget.m.widgetco.io_providerconfigs.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "endpoint"}, want: endpoint},
				{path: []string{"spec", "credentials", "source"}, want: source},
				{path: []string{"spec", "credentials", "secretRef"}, want: constraints{Type: "object", Required: []string{"key", "name"}, Properties: []string{"key", "name"}}},
			},
		},
		"ClusterProviderConfig": {
			reason:  "A ClusterProviderConfig must name the Secret's namespace; it may name an absolute token file instead.",
			file:    "widget.m.widgetco.io_clusterproviderconfigs.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "endpoint"}, want: endpoint},
				{path: []string{"spec", "credentials", "source"}, want: clusterSource},
				{path: []string{"spec", "credentials", "fs", "path"}, want: tokenFilePath},
				{path: []string{"spec", "credentials", "secretRef"}, want: constraints{Type: "object", Required: []string{"key", "name", "namespace"}, Properties: []string{"key", "name", "namespace"}}},
			},
		},
		"LegacyProviderConfig": {
			reason:  "A cluster-scoped legacy ProviderConfig must name the Secret's namespace; it may name an absolute token file instead.",
			file:    "widget.widgetco.io_providerconfigs.yaml",
			version: "v1alpha1",
			fields: []field{
				{path: []string{"spec", "endpoint"}, want: endpoint},
				{path: []string{"spec", "credentials", "source"}, want: clusterSource},
				{path: []string{"spec", "credentials", "fs", "path"}, want: tokenFilePath},
				{path: []string{"spec", "credentials", "secretRef"}, want: constraints{Type: "object", Required: []string{"key", "name", "namespace"}, Properties: []string{"key", "name", "namespace"}}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := loadCRD(t, tc.file)
			for _, f := range tc.fields {
				got := constraintsOf(schemaAt(t, crd, tc.version, f.path...))
				if len(f.want.Properties) == 0 {
					// Most fields are checked for their own constraints only.
					got.Properties = nil
				}
				if diff := cmp.Diff(f.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s\nconstraints at %v: -want, +got:\n%s", tc.reason, f.path, diff)
				}
			}
		})
	}
}

// TestCRDParameterFields checks which fields each version's spec,
// forProvider and initProvider have: v1beta1 moved a Widget's region and a
// WidgetKey's description from forProvider to initProvider.
func TestCRDParameterFields(t *testing.T) {
	nsSpec := []string{"forProvider", "managementPolicies", "providerConfigRef", "writeConnectionSecretToRef"}
	nsSpecInit := []string{"forProvider", "initProvider", "managementPolicies", "providerConfigRef", "writeConnectionSecretToRef"}
	clSpec := []string{"deletionPolicy", "forProvider", "managementPolicies", "providerConfigRef", "writeConnectionSecretToRef"}
	clSpecInit := []string{"deletionPolicy", "forProvider", "initProvider", "managementPolicies", "providerConfigRef", "writeConnectionSecretToRef"}
	cases := map[string]struct {
		reason  string
		file    string
		version string
		want    map[string][]string
	}{
		"NamespacedWidgetV1alpha1": {
			reason:  "A v1alpha1 Widget has only forProvider, with the region.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			version: "v1alpha1",
			want:    map[string][]string{"spec": nsSpec, "spec.forProvider": {"description", "labels", "region", "size"}},
		},
		"NamespacedWidgetV1beta1": {
			reason:  "A v1beta1 Widget's region is only in initProvider, which can set size, labels and description too.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			version: "v1beta1",
			want:    map[string][]string{"spec": nsSpecInit, "spec.forProvider": {"description", "labels", "size"}, "spec.initProvider": {"description", "labels", "region", "size"}},
		},
		"ClusterWidgetV1alpha1": {
			reason:  "A v1alpha1 Widget has only forProvider, with the region.",
			file:    "widget.widgetco.io_widgets.yaml",
			version: "v1alpha1",
			want:    map[string][]string{"spec": clSpec, "spec.forProvider": {"description", "labels", "region", "size"}},
		},
		"ClusterWidgetV1beta1": {
			reason:  "A v1beta1 Widget's region is only in initProvider, which can set size, labels and description too.",
			file:    "widget.widgetco.io_widgets.yaml",
			version: "v1beta1",
			want:    map[string][]string{"spec": clSpecInit, "spec.forProvider": {"description", "labels", "size"}, "spec.initProvider": {"description", "labels", "region", "size"}},
		},
		"NamespacedWidgetKeyV1alpha1": {
			reason:  "A v1alpha1 WidgetKey has only forProvider, with the description.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			version: "v1alpha1",
			want:    map[string][]string{"spec": nsSpec, "spec.forProvider": {"description", "widgetName", "widgetNameRef", "widgetNameSelector"}},
		},
		"NamespacedWidgetKeyV1beta1": {
			reason:  "A v1beta1 WidgetKey's description is only in initProvider; its rotation is in forProvider.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			version: "v1beta1",
			want:    map[string][]string{"spec": nsSpecInit, "spec.forProvider": {"rotation", "widgetName", "widgetNameRef", "widgetNameSelector"}, "spec.initProvider": {"description"}},
		},
		"ClusterWidgetKeyV1alpha1": {
			reason:  "A v1alpha1 WidgetKey has only forProvider, with the description.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			version: "v1alpha1",
			want:    map[string][]string{"spec": clSpec, "spec.forProvider": {"description", "widgetName", "widgetNameRef", "widgetNameSelector"}},
		},
		"ClusterWidgetKeyV1beta1": {
			reason:  "A v1beta1 WidgetKey's description is only in initProvider; its rotation is in forProvider.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			version: "v1beta1",
			want:    map[string][]string{"spec": clSpecInit, "spec.forProvider": {"rotation", "widgetName", "widgetNameRef", "widgetNameSelector"}, "spec.initProvider": {"description"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := loadCRD(t, tc.file)
			got := map[string][]string{}
			for _, path := range []string{"spec", "spec.forProvider", "spec.initProvider"} {
				p := strings.Split(path, ".")
				if _, ok := schemaAt(t, crd, tc.version, p[:len(p)-1]...).Properties[p[len(p)-1]]; !ok {
					continue
				}
				got[path] = constraintsOf(schemaAt(t, crd, tc.version, p...)).Properties
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nfields by path: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCRDDefaultsAndRequired(t *testing.T) {
	cases := map[string]struct {
		reason string
		file   string
		// versions are the versions checked; all the CRD's when nil.
		versions []string
		path     []string
		want     string
		require  []string
	}{
		"NamespacedWidgetForProviderDefault": {
			reason: "A namespaced Widget's forProvider defaults to {} so it cannot be dropped to bypass the rules on it.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider"},
			want:   "{}",
		},
		"ClusterWidgetForProviderDefault": {
			reason: "A cluster-scoped Widget's forProvider defaults to {} so it cannot be dropped to bypass the rules on it.",
			file:   "widget.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider"},
			want:   "{}",
		},
		"NamespacedWidgetInitProviderDefault": {
			reason:   "A namespaced Widget's initProvider should default to {} so it cannot be dropped to bypass the region rule.",
			file:     "widget.m.widgetco.io_widgets.yaml",
			versions: v1beta1Only,
			path:     []string{"spec", "initProvider"},
			want:     "{}",
		},
		"ClusterWidgetInitProviderDefault": {
			reason:   "A cluster-scoped Widget's initProvider should default to {} so it cannot be dropped to bypass the region rule.",
			file:     "widget.widgetco.io_widgets.yaml",
			versions: v1beta1Only,
			path:     []string{"spec", "initProvider"},
			want:     "{}",
		},
		"NamespacedWidgetKeyInitProviderDefault": {
			reason:   "A namespaced WidgetKey's initProvider should default to {} so it cannot be dropped to bypass the description rule.",
			file:     "widget.m.widgetco.io_widgetkeys.yaml",
			versions: v1beta1Only,
			path:     []string{"spec", "initProvider"},
			want:     "{}",
		},
		"ClusterWidgetKeyInitProviderDefault": {
			reason:   "A cluster-scoped WidgetKey's initProvider should default to {} so it cannot be dropped to bypass the description rule.",
			file:     "widget.widgetco.io_widgetkeys.yaml",
			versions: v1beta1Only,
			path:     []string{"spec", "initProvider"},
			want:     "{}",
		},
		"NamespacedWidgetProviderConfigRefDefault": {
			reason:  "A namespaced Widget without a providerConfigRef uses the ClusterProviderConfig named default.",
			file:    "widget.m.widgetco.io_widgets.yaml",
			path:    []string{"spec", "providerConfigRef"},
			want:    `{"kind":"ClusterProviderConfig","name":"default"}`,
			require: []string{"kind", "name"},
		},
		"NamespacedWidgetKeyProviderConfigRefDefault": {
			reason:  "A namespaced WidgetKey without a providerConfigRef uses the ClusterProviderConfig named default.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			path:    []string{"spec", "providerConfigRef"},
			want:    `{"kind":"ClusterProviderConfig","name":"default"}`,
			require: []string{"kind", "name"},
		},
		"NamespacedWidgetKeyForProviderRequired": {
			reason:  "A namespaced WidgetKey must have a forProvider naming its widget.",
			file:    "widget.m.widgetco.io_widgetkeys.yaml",
			path:    []string{"spec"},
			require: []string{"forProvider"},
		},
		"ClusterWidgetKeyForProviderRequired": {
			reason:  "A cluster-scoped WidgetKey must have a forProvider naming its widget.",
			file:    "widget.widgetco.io_widgetkeys.yaml",
			path:    []string{"spec"},
			require: []string{"forProvider"},
		},
		"ProviderConfigSpecRequired": {
			reason:  "A ProviderConfig must have an endpoint and credentials.",
			file:    "widget.m.widgetco.io_providerconfigs.yaml",
			path:    []string{"spec"},
			require: []string{"credentials", "endpoint"},
		},
		"ClusterProviderConfigSpecRequired": {
			reason:  "A ClusterProviderConfig must have an endpoint and credentials.",
			file:    "widget.m.widgetco.io_clusterproviderconfigs.yaml",
			path:    []string{"spec"},
			require: []string{"credentials", "endpoint"},
		},
		"LegacyProviderConfigSpecRequired": {
			reason:  "A legacy ProviderConfig must have an endpoint and credentials.",
			file:    "widget.widgetco.io_providerconfigs.yaml",
			path:    []string{"spec"},
			require: []string{"credentials", "endpoint"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := loadCRD(t, tc.file)
			versions := tc.versions
			if versions == nil {
				versions = wantCRDs[tc.file].identity.Versions
			}
			var problems []string
			for _, version := range versions {
				s := schemaAt(t, crd, version, tc.path...)
				got := ""
				if s.Default != nil {
					got = string(s.Default.Raw)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					problems = append(problems, fmt.Sprintf("%s default at %v: -want, +got:\n%s", version, tc.path, diff))
				}
				if diff := cmp.Diff(tc.require, s.Required, cmpopts.EquateEmpty()); diff != "" {
					problems = append(problems, fmt.Sprintf("%s required at %v: -want, +got:\n%s", version, tc.path, diff))
				}
			}
			if len(problems) > 0 {
				t.Errorf("%s\n%s", tc.reason, strings.Join(problems, "\n"))
			}
		})
	}
}

// TestCRDsFollowWidgetAPIRules ties the CRDs' markers, which cannot name Go
// constants, to the Widget API's rules (widgetapi/rules.go): a change to the
// rules must be a change to the markers too.
func TestCRDsFollowWidgetAPIRules(t *testing.T) {
	sizes := make([]string, 0, len(widgetapi.Sizes))
	for _, s := range widgetapi.Sizes {
		sizes = append(sizes, `"`+s+`"`)
	}
	// Where each version of a Widget has each field the Widget API checks.
	widgetFields := map[string][][]string{
		"v1alpha1": {
			{"spec", "forProvider", "size"}, {"spec", "forProvider", "region"}, {"spec", "forProvider", "labels"}, {"spec", "forProvider", "description"},
		},
		"v1beta1": {
			{"spec", "forProvider", "size"}, {"spec", "forProvider", "labels"}, {"spec", "forProvider", "description"},
			{"spec", "initProvider", "size"}, {"spec", "initProvider", "region"}, {"spec", "initProvider", "labels"}, {"spec", "initProvider", "description"},
		},
	}
	for _, file := range []string{"widget.m.widgetco.io_widgets.yaml", "widget.widgetco.io_widgets.yaml"} {
		crd := loadCRD(t, file)
		for version, paths := range widgetFields {
			for _, path := range paths {
				c := constraintsOf(schemaAt(t, crd, version, path...))
				var got, want any
				switch path[len(path)-1] {
				case "size":
					got, want = c.Enum, sizes
				case "region":
					got, want = [2]any{c.Pattern, ptr.Deref(c.MaxLength, -1)}, [2]any{widgetapi.RegionPattern, int64(widgetapi.MaxRegionLength)}
				case "labels":
					// One label is the provider's ownership marker.
					got, want = ptr.Deref(c.MaxProperties, -1), int64(widgetapi.MaxLabels-1)
				case "description":
					got, want = ptr.Deref(c.MaxLength, -1), int64(widgetapi.MaxDescriptionLength)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s %s %v: -Widget API rules, +CRD:\n%s", file, version, path, diff)
				}
			}
		}
	}
	for _, file := range []string{"widget.m.widgetco.io_widgetkeys.yaml", "widget.widgetco.io_widgetkeys.yaml"} {
		crd := loadCRD(t, file)
		for _, version := range bothVersions {
			c := constraintsOf(schemaAt(t, crd, version, "spec", "forProvider", "widgetName"))
			if c.Pattern != widgetapi.NamePattern || ptr.Deref(c.MaxLength, -1) != int64(widgetapi.MaxNameLength) {
				t.Errorf("%s %s: widgetName is %q (at most %d), want the Widget API's name rule %q (at most %d)", file, version, c.Pattern, ptr.Deref(c.MaxLength, -1), widgetapi.NamePattern, widgetapi.MaxNameLength)
			}
		}
	}
}
