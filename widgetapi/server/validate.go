package server

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// maxBodyBytes is the largest request body (openapi.yaml states the same).
// The rules for the fields are widgetapi's (rules.go).
const maxBodyBytes = 64 << 10

// fieldErrors accumulates validation problems.
type fieldErrors []widgetapi.FieldError

func (f *fieldErrors) add(field, msg string) {
	*f = append(*f, widgetapi.FieldError{Field: field, Message: msg})
}

func validName(field, v string, errs *fieldErrors) {
	switch {
	case v == "":
		errs.add(field, "is required")
	case !widgetapi.ValidName(v):
		errs.add(field, "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit")
	}
}

func validSize(v string, errs *fieldErrors) {
	if v != "" && !widgetapi.ValidSize(v) {
		errs.add("size", "must be one of small, medium, large")
	}
}

func (s *Server) validRegion(v string, errs *fieldErrors) {
	switch {
	case v == "":
	case !widgetapi.ValidRegion(v):
		errs.add("region", "must look like us-east-1: lowercase words and a number separated by '-', at most 32 characters")
	case len(s.opts.Regions) > 0 && !slices.Contains(s.opts.Regions, v):
		errs.add("region", "must be one of "+strings.Join(s.opts.Regions, ", "))
	}
}

func validLabels(labels map[string]string, errs *fieldErrors) {
	if len(labels) > widgetapi.MaxLabels {
		errs.add("labels", fmt.Sprintf("must have at most %d entries", widgetapi.MaxLabels))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic error order
	for _, k := range keys {
		if !widgetapi.ValidLabelKey(k) {
			errs.add("labels["+k+"]", "key must be at most 63 lowercase letters, digits, '.', '_', '/' and '-', starting and ending with a letter or digit")
		}
		if v := labels[k]; len(v) > widgetapi.MaxLabelValueLength || !printable(v) {
			errs.add("labels["+k+"]", "value must be at most 63 printable characters")
		}
	}
}

func validDescription(v string, errs *fieldErrors) {
	if utf8.RuneCountInString(v) > widgetapi.MaxDescriptionLength || !utf8.ValidString(v) || !printableOrSpace(v) {
		errs.add("description", fmt.Sprintf("must be at most %d printable characters", widgetapi.MaxDescriptionLength))
	}
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

func printableOrSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

func (s *Server) validateCreate(req *widgetapi.CreateWidgetRequest) fieldErrors {
	var errs fieldErrors
	validName("name", req.Name, &errs)
	validSize(req.Size, &errs)
	s.validRegion(req.Region, &errs)
	validLabels(req.Labels, &errs)
	validDescription(req.Description, &errs)
	return errs
}

// validateReplace checks a PUT against the current widget; region may be
// repeated but not changed.
func validateReplace(req *widgetapi.ReplaceWidgetRequest, cur *widgetapi.Widget) fieldErrors {
	var errs fieldErrors
	validSize(req.Size, &errs)
	if req.Region != "" && req.Region != cur.Region {
		errs.add("region", "is immutable: the widget is in "+cur.Region+"; create a new widget to use another region")
	}
	validLabels(req.Labels, &errs)
	validDescription(req.Description, &errs)
	return errs
}

func validatePatch(req *widgetapi.PatchWidgetRequest, cur *widgetapi.Widget) fieldErrors {
	var errs fieldErrors
	if req.Size != nil {
		if *req.Size == "" {
			errs.add("size", "must be one of small, medium, large")
		}
		validSize(*req.Size, &errs)
	}
	if req.Region != nil && *req.Region != cur.Region {
		errs.add("region", "is immutable: the widget is in "+cur.Region+"; create a new widget to use another region")
	}
	if req.Labels != nil {
		validLabels(*req.Labels, &errs)
	}
	if req.Description != nil {
		validDescription(*req.Description, &errs)
	}
	return errs
}

func validateKey(req *widgetapi.CreateKeyRequest) fieldErrors {
	var errs fieldErrors
	validName("name", req.Name, &errs)
	validLabels(req.Labels, &errs)
	validDescription(req.Description, &errs)
	return errs
}
