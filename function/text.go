package main

import "unicode/utf8"

// maxShown is the most characters of a value from the request that a message
// repeats, so that a huge value cannot make a huge condition or event.
const maxShown = 64

// maxProviderMessage is the most bytes of a managed resource's own condition
// message that a condition of the XR repeats.
const maxProviderMessage = 512

// shown is a value from the request as a message repeats it: at most
// maxShown characters, marked with "..." when shortened.
func shown(s string) string {
	if head, cut := firstRunes(s, maxShown); cut {
		return head + "..."
	}
	return s
}

// firstRunes returns the first n characters of s, and whether that is not
// all of s. It reads no more of s than it returns.
func firstRunes(s string, n int) (string, bool) {
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

// describe returns prefix + who + suffix: the description of a resource
// composed for who. When it would be longer than a description may be, who
// is shortened on a character boundary and marked with "...", so that the
// description always fits. The result depends only on its arguments.
func describe(prefix, who, suffix string) string {
	room := maxDescription - utf8.RuneCountInString(prefix) - utf8.RuneCountInString(suffix)
	if head, cut := firstRunes(who, room); !cut {
		return prefix + head + suffix
	}
	head, _ := firstRunes(who, room-len("..."))
	return prefix + head + "..." + suffix
}

// truncate shortens s to at most maxProviderMessage bytes, on a character
// boundary.
func truncate(s string) string {
	if len(s) <= maxProviderMessage {
		return s
	}
	cut := maxProviderMessage - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
