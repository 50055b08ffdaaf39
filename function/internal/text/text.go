// Package text holds what function-widget's messages share: how a message
// repeats a value from a request, so that a huge value cannot make a huge
// condition or event, and how it words a list of invalid fields. The
// composition (package fn) and namespace admission (package nspolicy) both
// use it, so that their messages read the same.
package text

import (
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// MaxShown is the most characters of a value from the request that a message
// repeats, so that a huge value cannot make a huge condition or event.
const MaxShown = 64

// MaxProviderMessage is the most bytes of a managed resource's own condition
// message that a condition of the XR repeats.
const MaxProviderMessage = 512

// Shown is a value from the request as a message repeats it: at most
// MaxShown characters, marked with "..." when shortened.
func Shown(s string) string {
	if head, cut := FirstRunes(s, MaxShown); cut {
		return head + "..."
	}
	return s
}

// FirstRunes returns the first n characters of s, and whether that is not
// all of s. It reads no more of s than it returns.
func FirstRunes(s string, n int) (string, bool) {
	i := 0
	for range n {
		if i >= len(s) {
			return s, false
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], i < len(s)
}

// Truncate shortens s to at most MaxProviderMessage bytes, on a character
// boundary.
func Truncate(s string) string {
	if len(s) <= MaxProviderMessage {
		return s
	}
	cut := MaxProviderMessage - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Plural is one when n is 1, otherwise many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Join words a list of invalid fields for a message: each field's error,
// separated by "; ".
func Join(errs field.ErrorList) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

// ValidateRegion returns an error at p unless r is a region of the Widget
// API, such as us-east-1. The WidgetPolicy, an XWidget and a namespace
// policy name regions by the same rule.
func ValidateRegion(r string, p *field.Path) field.ErrorList {
	if !widgetapi.ValidRegion(r) {
		return field.ErrorList{field.Invalid(p, Shown(r), "must be a region such as us-east-1: lowercase words and a number, separated by '-', at most 32 characters")}
	}
	return nil
}
