package widgetapi

import (
	"regexp"
	"slices"
)

// The Widget API's rules for what clients send. They are the one source in
// Go: the reference server enforces them, the provider and the function
// check generated values against them, and TestRulesMatchContract checks
// that openapi.yaml states the same. (The CRDs' markers cannot name Go
// constants; the apis package's tests compare them with these.)
const (
	// MaxNameLength is the longest widget or key name.
	MaxNameLength = 63
	// NamePattern is what a widget or key name looks like: a DNS-1123
	// label.
	NamePattern = `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`
	// MaxRegionLength is the longest region.
	MaxRegionLength = 32
	// RegionPattern is what a region looks like: us-east-1.
	RegionPattern = `^[a-z]+(-[a-z]+)*-[0-9]+$`
	// MaxLabels is how many labels a widget or key may carry.
	MaxLabels = 32
	// MaxLabelKeyLength is the longest label key.
	MaxLabelKeyLength = 63
	// LabelKeyPattern is what a label key looks like.
	LabelKeyPattern = `^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`
	// MaxLabelValueLength is the longest label value, in bytes.
	MaxLabelValueLength = 63
	// MaxDescriptionLength is the longest description, in characters.
	MaxDescriptionLength = 256
)

// Sizes are the sizes a widget can have, smallest first.
var Sizes = []string{SizeSmall, SizeMedium, SizeLarge}

var (
	nameRE     = regexp.MustCompile(NamePattern)
	regionRE   = regexp.MustCompile(RegionPattern)
	labelKeyRE = regexp.MustCompile(LabelKeyPattern)
)

// ValidName reports whether s can name a widget or a key.
func ValidName(s string) bool { return len(s) <= MaxNameLength && nameRE.MatchString(s) }

// ValidRegion reports whether s looks like a region. A server may still
// allow only some regions.
func ValidRegion(s string) bool { return len(s) <= MaxRegionLength && regionRE.MatchString(s) }

// ValidLabelKey reports whether s can be a label key.
func ValidLabelKey(s string) bool { return len(s) <= MaxLabelKeyLength && labelKeyRE.MatchString(s) }

// ValidSize reports whether s is one of Sizes.
func ValidSize(s string) bool { return slices.Contains(Sizes, s) }
