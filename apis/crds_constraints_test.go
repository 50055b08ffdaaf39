package apis_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

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

	type field struct {
		path []string
		want constraints
	}
	cases := map[string]struct {
		reason string
		file   string
		fields []field
	}{
		"NamespacedWidget": {
			reason: "A namespaced Widget's forProvider must be validated as the Widget API validates a widget.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			fields: []field{
				{path: []string{"spec", "forProvider", "size"}, want: size},
				{path: []string{"spec", "forProvider", "region"}, want: region},
				{path: []string{"spec", "forProvider", "labels"}, want: labels},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"ClusterWidget": {
			reason: "A cluster-scoped Widget's forProvider must be validated as the Widget API validates a widget.",
			file:   "widget.widgetco.io_widgets.yaml",
			fields: []field{
				{path: []string{"spec", "forProvider", "size"}, want: size},
				{path: []string{"spec", "forProvider", "region"}, want: region},
				{path: []string{"spec", "forProvider", "labels"}, want: labels},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"NamespacedWidgetKey": {
			reason: "A namespaced WidgetKey's widget name must be a valid widget name.",
			file:   "widget.m.widgetco.io_widgetkeys.yaml",
			fields: []field{
				{path: []string{"spec", "forProvider", "widgetName"}, want: widgetName},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"ClusterWidgetKey": {
			reason: "A cluster-scoped WidgetKey's widget name must be a valid widget name.",
			file:   "widget.widgetco.io_widgetkeys.yaml",
			fields: []field{
				{path: []string{"spec", "forProvider", "widgetName"}, want: widgetName},
				{path: []string{"spec", "forProvider", "description"}, want: description},
			},
		},
		"NamespacedProviderConfig": {
			reason: "A namespaced ProviderConfig must name a Secret in its own namespace: its secretRef has no namespace.",
			file:   "widget.m.widgetco.io_providerconfigs.yaml",
			fields: []field{
				{path: []string{"spec", "endpoint"}, want: endpoint},
				{path: []string{"spec", "credentials", "source"}, want: source},
				{path: []string{"spec", "credentials", "secretRef"}, want: constraints{Type: "object", Required: []string{"key", "name"}, Properties: []string{"key", "name"}}},
			},
		},
		"ClusterProviderConfig": {
			reason: "A ClusterProviderConfig must name the Secret's namespace.",
			file:   "widget.m.widgetco.io_clusterproviderconfigs.yaml",
			fields: []field{
				{path: []string{"spec", "endpoint"}, want: endpoint},
				{path: []string{"spec", "credentials", "source"}, want: source},
				{path: []string{"spec", "credentials", "secretRef"}, want: constraints{Type: "object", Required: []string{"key", "name", "namespace"}, Properties: []string{"key", "name", "namespace"}}},
			},
		},
		"LegacyProviderConfig": {
			reason: "A cluster-scoped legacy ProviderConfig must name the Secret's namespace.",
			file:   "widget.widgetco.io_providerconfigs.yaml",
			fields: []field{
				{path: []string{"spec", "endpoint"}, want: endpoint},
				{path: []string{"spec", "credentials", "source"}, want: source},
				{path: []string{"spec", "credentials", "secretRef"}, want: constraints{Type: "object", Required: []string{"key", "name", "namespace"}, Properties: []string{"key", "name", "namespace"}}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd := loadCRD(t, tc.file)
			for _, f := range tc.fields {
				got := constraintsOf(schemaAt(t, crd, f.path...))
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

func TestCRDDefaultsAndRequired(t *testing.T) {
	cases := map[string]struct {
		reason  string
		file    string
		path    []string
		want    string
		require []string
	}{
		"NamespacedWidgetForProviderDefault": {
			reason: "A namespaced Widget's forProvider defaults to {} so it cannot be dropped to bypass the region rule.",
			file:   "widget.m.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider"},
			want:   "{}",
		},
		"ClusterWidgetForProviderDefault": {
			reason: "A cluster-scoped Widget's forProvider defaults to {} so it cannot be dropped to bypass the region rule.",
			file:   "widget.widgetco.io_widgets.yaml",
			path:   []string{"spec", "forProvider"},
			want:   "{}",
		},
		"NamespacedWidgetProviderConfigRefDefault": {
			reason:  "A namespaced Widget without a providerConfigRef uses the ClusterProviderConfig named default.",
			file:    "widget.m.widgetco.io_widgets.yaml",
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
			s := schemaAt(t, loadCRD(t, tc.file), tc.path...)
			got := ""
			if s.Default != nil {
				got = string(s.Default.Raw)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndefault at %v: -want, +got:\n%s", tc.reason, tc.path, diff)
			}
			if diff := cmp.Diff(tc.require, s.Required, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nrequired at %v: -want, +got:\n%s", tc.reason, tc.path, diff)
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
	for _, file := range []string{"widget.m.widgetco.io_widgets.yaml", "widget.widgetco.io_widgets.yaml"} {
		crd := loadCRD(t, file)
		fp := func(f string) constraints { return constraintsOf(schemaAt(t, crd, "spec", "forProvider", f)) }
		got := map[string]any{
			"size.enum":             fp("size").Enum,
			"region.pattern":        fp("region").Pattern,
			"region.maxLength":      ptr.Deref(fp("region").MaxLength, -1),
			"labels.maxProperties":  ptr.Deref(fp("labels").MaxProperties, -1),
			"description.maxLength": ptr.Deref(fp("description").MaxLength, -1),
		}
		want := map[string]any{
			"size.enum":        sizes,
			"region.pattern":   widgetapi.RegionPattern,
			"region.maxLength": int64(widgetapi.MaxRegionLength),
			// One label is the provider's ownership marker.
			"labels.maxProperties":  int64(widgetapi.MaxLabels - 1),
			"description.maxLength": int64(widgetapi.MaxDescriptionLength),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: -Widget API rules, +CRD:\n%s", file, diff)
		}
	}
	for _, file := range []string{"widget.m.widgetco.io_widgetkeys.yaml", "widget.widgetco.io_widgetkeys.yaml"} {
		c := constraintsOf(schemaAt(t, loadCRD(t, file), "spec", "forProvider", "widgetName"))
		if c.Pattern != widgetapi.NamePattern || ptr.Deref(c.MaxLength, -1) != int64(widgetapi.MaxNameLength) {
			t.Errorf("%s: widgetName is %q (at most %d), want the Widget API's name rule %q (at most %d)", file, c.Pattern, ptr.Deref(c.MaxLength, -1), widgetapi.NamePattern, widgetapi.MaxNameLength)
		}
	}
}
