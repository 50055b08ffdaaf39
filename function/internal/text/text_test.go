package text

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShown(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"Short":     {reason: "A value of at most 64 characters is shown as it is.", in: strings.Repeat("v", 64), want: strings.Repeat("v", 64)},
		"Long":      {reason: "A longer value is shortened to 64 characters, marked with '...'.", in: strings.Repeat("v", 65), want: strings.Repeat("v", 64) + "..."},
		"Multibyte": {reason: "A value is shortened on a character boundary.", in: strings.Repeat("ß", 100), want: strings.Repeat("ß", 64) + "..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Shown(tc.in); got != tc.want {
				t.Errorf("%s\nShown(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		reason string
		s      string
		want   string
	}{
		"Short": {
			reason: "A short message is kept.",
			s:      "fine",
			want:   "fine",
		},
		"Long": {
			reason: "A long message is cut to the limit, with an ellipsis.",
			s:      strings.Repeat("a", 600),
			want:   strings.Repeat("a", 509) + "...",
		},
		"MultiByte": {
			reason: "A long message is cut on a character boundary.",
			s:      strings.Repeat("a", 508) + "éééé",
			want:   strings.Repeat("a", 508) + "...",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Truncate(tc.s)); diff != "" {
				t.Errorf("%s\nTruncate(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
