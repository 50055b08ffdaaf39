package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A figure is a number with a unit of time, size, rate, ratio or work, or a
// range of them: "13.15 s", "113-115 MiB", "0.52x", "4.3 %", "3.08 updates".
var figure = regexp.MustCompile(`(?:^|[^\w.,-])(\d[\d,]*(?:\.\d+)?(?:\s?-\s?\d[\d,]*(?:\.\d+)?)?\s?(?:ns|µs|us|ms|s|min|minutes?|seconds?|h|hours?|KiB|MiB|GiB|KB|MB|GB|%|x|/s|req/s|requests|writes|reads|reconciles|updates|calls))(?:$|[^\w%/])`)

// notMeasured are figures the README may state that are settings or facts,
// not measurements, so they need not come from the benchmark page.
var notMeasured = []string{
	"10 s", // token Secrets are read again after at most 10 s (TokenTTL)
}

var (
	fence    = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	comment  = regexp.MustCompile(`(?s)<!--.*?-->`)
	// linkTarget is the (target) of a markdown link or image.
	linkTarget = regexp.MustCompile(`\]\([^)\s]*\)`)
)

// prose returns the markdown without code, comments and link targets:
// what a reader reads as text.
func prose(md string) string {
	for _, re := range []*regexp.Regexp{fence, comment, codeSpan, linkTarget} {
		md = re.ReplaceAllString(md, " ")
	}
	return md
}

// figures returns every figure in the prose of md, in order.
func figures(md string) []string {
	ms := figure.FindAllStringSubmatch(prose(md), -1)
	if len(ms) == 0 {
		return nil
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

// contains reports whether page states figure f as a whole: "3.08 s" is not
// in "13.08 s", and "30 s" is not in "30 seconds".
func contains(page, f string) bool {
	re := regexp.MustCompile(`(?:^|[^\w.,-])` + strings.ReplaceAll(regexp.QuoteMeta(f), " ", `\s+`) + `(?:$|[^\w%/])`)
	return re.MatchString(page)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADMEFiguresComeFromBenchmarks fails when the README states a
// measured figure that docs/benchmarks.md does not state in the same words:
// a figure lives on the benchmark page and is quoted from there, so that a
// new run changes it in one place.
func TestREADMEFiguresComeFromBenchmarks(t *testing.T) {
	readme := read(t, filepath.Join("..", "README.md"))
	bench := prose(read(t, "benchmarks.md"))
	found := figures(readme)
	if len(found) == 0 {
		t.Fatal("found no figures in README.md: the pattern is broken")
	}
	for _, f := range found {
		if slices.Contains(notMeasured, f) {
			continue
		}
		if !contains(bench, f) {
			t.Errorf("README.md states %q, which docs/benchmarks.md does not: quote the benchmark page, or add the figure there with its conditions", f)
		}
	}
}

func TestFigures(t *testing.T) {
	cases := map[string]struct {
		reason string
		md     string
		want   []string
	}{
		"Units": {
			reason: "Times, sizes, ratios and counts of work are figures.",
			md:     "all Ready in 13.15 s, RSS 113-115 MiB, p50 0.52x, 4.3 % of raw, 3.08 updates, 1,000 new Widgets",
			want:   []string{"13.15 s", "113-115 MiB", "0.52x", "4.3 %", "3.08 updates"},
		},
		"Code": {
			reason: "Settings in code spans and blocks are not figures.",
			md:     "`--poll-interval=10m` and `60s`\n```\n[   4s] Ready\n```\nabout 12 minutes",
			want:   []string{"12 minutes"},
		},
		"Links": {
			reason: "Anchors and paths in link targets are not figures.",
			md:     "[x](docs/benchmarks.md#provider-widget-1000-new-widgets-10-s)",
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := figures(tc.md); !slices.Equal(got, tc.want) {
				t.Errorf("%s\nfigures(...) = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestContains(t *testing.T) {
	cases := map[string]struct {
		page string
		f    string
		want bool
	}{
		"Same":          {page: "all Ready in 13.15 s and", f: "13.15 s", want: true},
		"Wrapped":       {page: "all Ready in 13.15\ns", f: "13.15 s", want: true},
		"LongerNumber":  {page: "took 113.15 s", f: "13.15 s", want: false},
		"MoreDecimals":  {page: "took 13.155 s", f: "13.15 s", want: false},
		"OtherUnit":     {page: "took 30 seconds", f: "30 s", want: false},
		"RangeEnd":      {page: "RSS 113-115 MiB", f: "115 MiB", want: false},
		"OtherDecimals": {page: "p99 3.9 s", f: "3.90 s", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := contains(tc.page, tc.f); got != tc.want {
				t.Errorf("contains(%q, %q) = %v, want %v", tc.page, tc.f, got, tc.want)
			}
		})
	}
}
