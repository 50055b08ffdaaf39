//go:build !testhooks

package main

import (
	"testing"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
)

// TestFlags parses command lines as the packages' binary (built without
// the testhooks tag) does: the test hooks are not there, and values the
// provider cannot run with are refused before it connects to anything.
func TestFlags(t *testing.T) {
	cases := map[string]struct {
		args      []string
		wantParse bool
		wantValid bool
	}{
		"Defaults":                   {wantParse: true, wantValid: true},
		"ShortestRefusedTokenPause":  {args: []string{"--refused-token-pause=1s"}, wantParse: true, wantValid: true},
		"NoRefusedTokenPause":        {args: []string{"--refused-token-pause=0"}, wantParse: true},
		"SubSecondRefusedTokenPause": {args: []string{"--refused-token-pause=500ms"}, wantParse: true},
		"NoMinPollInterval":          {args: []string{"--min-poll-interval=0"}, wantParse: true},
		"TestClockIsNoFlag":          {args: []string{"--test-clock-file=/tmp/clock"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &cli{}
			p, err := kong.New(c, kong.Vars{"version": version, "changelogs_socket": "/tmp/s"})
			if err != nil {
				t.Fatal(err)
			}
			_, perr := p.Parse(tc.args)
			if diff := cmp.Diff(tc.wantParse, perr == nil); diff != "" {
				t.Fatalf("parsed: -want +got:\n%s (error %v)", diff, perr)
			}
			if perr != nil {
				return
			}
			verr := c.validate()
			if diff := cmp.Diff(tc.wantValid, verr == nil); diff != "" {
				t.Errorf("valid: -want +got:\n%s (error %v)", diff, verr)
			}
		})
	}
}
