package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		reason string
		s      apiextensionsv1.JSONSchemaProps
		want   string
	}{
		"Plain":   {"a description alone", apiextensionsv1.JSONSchemaProps{Description: "Size."}, "Size."},
		"Enum":    {"enums are listed", apiextensionsv1.JSONSchemaProps{Description: "Size.", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"small"`)}, {Raw: []byte(`"large"`)}}}, "Size. Validation: one of `small`, `large`."},
		"Limits":  {"limits and patterns are listed", apiextensionsv1.JSONSchemaProps{Pattern: "^a$", MaxLength: ptr.To[int64](3)}, "Validation: pattern `^a$`; at most 3 characters."},
		"CEL":     {"CEL rules show their message", apiextensionsv1.JSONSchemaProps{XValidations: apiextensionsv1.ValidationRules{{Rule: "self == oldSelf", Message: "is immutable"}}}, "Validation: rule: is immutable."},
		"RawRule": {"a rule without message shows the rule", apiextensionsv1.JSONSchemaProps{XValidations: apiextensionsv1.ValidationRules{{Rule: "self > 0"}}}, "Validation: rule: `self > 0`."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, describe(&tc.s)); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
