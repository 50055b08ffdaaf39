package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		reason string
		prefix string
		who    string
		want   string
	}{
		"Fits": {
			reason: "A description that fits is the prefix, who and the suffix.",
			prefix: "Access key 0 of ",
			who:    "XWidget team-a/web",
			want:   "Access key 0 of XWidget team-a/web, managed by Crossplane",
		},
		"FitsExactly": {
			reason: "A description of exactly 256 characters is not shortened.",
			who:    strings.Repeat("w", 233),
			want:   strings.Repeat("w", 233) + ", managed by Crossplane",
		},
		"OneTooLong": {
			reason: "A description of 257 characters is shortened to 256, marked with '...'.",
			who:    strings.Repeat("w", 234),
			want:   strings.Repeat("w", 230) + "..., managed by Crossplane",
		},
		"Multibyte": {
			reason: "Who is shortened on a character boundary, counting characters, not bytes.",
			who:    strings.Repeat("ü", 300),
			want:   strings.Repeat("ü", 230) + "..., managed by Crossplane",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := describe(tc.prefix, tc.who, ", managed by Crossplane")
			if got != tc.want {
				t.Errorf("%s\ndescribe(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

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
			if got := shown(tc.in); got != tc.want {
				t.Errorf("%s\nshown(...): want %q, got %q", tc.reason, tc.want, got)
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
			if diff := cmp.Diff(tc.want, truncate(tc.s)); diff != "" {
				t.Errorf("%s\ntruncate(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
