package server

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Limits of the contract (openapi.yaml states the same).
const (
	maxNameLength        = 63
	maxRegionLength      = 32
	maxLabels            = 32
	maxLabelKeyLength    = 63
	maxLabelValueLength  = 63
	maxDescriptionLength = 256
	maxBodyBytes         = 64 << 10
)

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	regionRE   = regexp.MustCompile(`^[a-z]+(-[a-z]+)*-[0-9]+$`)
	labelKeyRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`)
	sizes      = []string{widgetapi.SizeSmall, widgetapi.SizeMedium, widgetapi.SizeLarge}
)

// fieldErrors accumulates validation problems.
type fieldErrors []widgetapi.FieldError

func (f *fieldErrors) add(field, msg string) {
	*f = append(*f, widgetapi.FieldError{Field: field, Message: msg})
}

func validName(field, v string, errs *fieldErrors) {
	switch {
	case v == "":
		errs.add(field, "is required")
	case len(v) > maxNameLength || !nameRE.MatchString(v):
		errs.add(field, "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit")
	}
}

func validSize(v string, errs *fieldErrors) {
	if v != "" && !slices.Contains(sizes, v) {
		errs.add("size", "must be one of small, medium, large")
	}
}

func (s *Server) validRegion(v string, errs *fieldErrors) {
	switch {
	case v == "":
	case len(v) > maxRegionLength || !regionRE.MatchString(v):
		errs.add("region", "must look like us-east-1: lowercase words and a number separated by '-', at most 32 characters")
	case len(s.opts.Regions) > 0 && !slices.Contains(s.opts.Regions, v):
		errs.add("region", "must be one of "+strings.Join(s.opts.Regions, ", "))
	}
}

func validLabels(labels map[string]string, errs *fieldErrors) {
	if len(labels) > maxLabels {
		errs.add("labels", fmt.Sprintf("must have at most %d entries", maxLabels))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic error order
	for _, k := range keys {
		if len(k) > maxLabelKeyLength || !labelKeyRE.MatchString(k) {
			errs.add("labels["+k+"]", "key must be at most 63 lowercase letters, digits, '.', '_', '/' and '-', starting and ending with a letter or digit")
		}
		if v := labels[k]; len(v) > maxLabelValueLength || !printable(v) {
			errs.add("labels["+k+"]", "value must be at most 63 printable characters")
		}
	}
}

func validDescription(v string, errs *fieldErrors) {
	if utf8.RuneCountInString(v) > maxDescriptionLength || !utf8.ValidString(v) || !printableOrSpace(v) {
		errs.add("description", fmt.Sprintf("must be at most %d printable characters", maxDescriptionLength))
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
