package fn

import (
	"unicode/utf8"

	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// describe returns prefix + who + suffix: the description of a resource
// composed for who. When it would be longer than a description may be, who
// is shortened on a character boundary and marked with "...", so that the
// description always fits. The result depends only on its arguments.
func describe(prefix, who, suffix string) string {
	room := maxDescription - utf8.RuneCountInString(prefix) - utf8.RuneCountInString(suffix)
	if head, cut := text.FirstRunes(who, room); !cut {
		return prefix + head + suffix
	}
	head, _ := text.FirstRunes(who, room-len("..."))
	return prefix + head + "..." + suffix
}
