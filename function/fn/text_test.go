package fn

import (
	"strings"
	"testing"
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
