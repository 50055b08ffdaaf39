package widgetapi_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestRulesMatchContract checks that openapi.yaml states the rules the Go
// constants define: a change to one must be a change to the other.
func TestRulesMatchContract(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				MaxLength     *int     `json:"maxLength"`
				MaxProperties *int     `json:"maxProperties"`
				Pattern       string   `json:"pattern"`
				Enum          []string `json:"enum"`
				// AdditionalProperties is false, or a schema.
				AdditionalProperties json.RawMessage `json:"additionalProperties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := yaml.Unmarshal(widgetapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Components.Schemas
	deref := func(p *int) int {
		if p == nil {
			return -1
		}
		return *p
	}
	got := map[string]any{
		"Name.maxLength":                        deref(s["Name"].MaxLength),
		"Name.pattern":                          s["Name"].Pattern,
		"Region.maxLength":                      deref(s["Region"].MaxLength),
		"Region.pattern":                        s["Region"].Pattern,
		"Size.enum":                             s["Size"].Enum,
		"Labels.maxProperties":                  deref(s["Labels"].MaxProperties),
		"Labels.additionalProperties.maxLength": -1,
		"Description.maxLength":                 deref(s["Description"].MaxLength),
	}
	var values struct {
		MaxLength *int `json:"maxLength"`
	}
	if err := json.Unmarshal(s["Labels"].AdditionalProperties, &values); err == nil {
		got["Labels.additionalProperties.maxLength"] = deref(values.MaxLength)
	}
	want := map[string]any{
		"Name.maxLength":                        widgetapi.MaxNameLength,
		"Name.pattern":                          widgetapi.NamePattern,
		"Region.maxLength":                      widgetapi.MaxRegionLength,
		"Region.pattern":                        widgetapi.RegionPattern,
		"Size.enum":                             widgetapi.Sizes,
		"Labels.maxProperties":                  widgetapi.MaxLabels,
		"Labels.additionalProperties.maxLength": widgetapi.MaxLabelValueLength,
		"Description.maxLength":                 widgetapi.MaxDescriptionLength,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("openapi.yaml and the Go rules differ: -Go, +openapi.yaml:\n%s", diff)
	}
}

func TestValid(t *testing.T) {
	cases := map[string]struct {
		fn   func(string) bool
		in   string
		want bool
	}{
		"Name":            {fn: widgetapi.ValidName, in: "web-1", want: true},
		"NameUpper":       {fn: widgetapi.ValidName, in: "Web"},
		"NameTooLong":     {fn: widgetapi.ValidName, in: "a123456789012345678901234567890123456789012345678901234567890123"},
		"Region":          {fn: widgetapi.ValidRegion, in: "eu-west-1", want: true},
		"RegionNoNumber":  {fn: widgetapi.ValidRegion, in: "eu-west"},
		"LabelKey":        {fn: widgetapi.ValidLabelKey, in: "widgetco.io/owner", want: true},
		"LabelKeyDashEnd": {fn: widgetapi.ValidLabelKey, in: "team-"},
		"Size":            {fn: widgetapi.ValidSize, in: "medium", want: true},
		"SizeUnknown":     {fn: widgetapi.ValidSize, in: "huge"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.fn(tc.in); got != tc.want {
				t.Errorf("%q: want %t, got %t", tc.in, tc.want, got)
			}
		})
	}
}
