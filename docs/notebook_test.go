package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The engineers' lab notebook (the investigation narrative and the history
// of benchmark runs) lives in notes/ at the top of the repository. docs/ and
// README.md state the current product: they do not link into notes/, and
// they carry none of the notebook's marks.
var (
	// dated is a date in a heading or a link: "## 2026-11-27 (fourth
	// session)", "#2026-11-27-fifth-session-...".
	dated = regexp.MustCompile(`20\d\d-\d\d`)
	// session is a work session named in a heading or a link; not a file
	// named session.go.
	session = regexp.MustCompile(`(?i)\bsessions?($|[^.\w])`)
	// next is a "Next" heading ("Next", "Next (2026-11-25)", "Next:"): a
	// to-do list of the work, not the product.
	next = regexp.MustCompile(`(?i)^next\s*($|[(:])`)
	// linkText is a markdown link or image: its text and its target.
	linkText = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
)

// notebookMarks returns what in md, the page at repository-relative path
// page, belongs in the notebook and not on a product page: a link into
// notes/, a heading with a date, a session or a wip/ branch, a "Next"
// heading, a link with a date, a session or a wip/ branch. Code blocks and
// code spans are not read.
func notebookMarks(page, md string) []string {
	text := codeSpan.ReplaceAllString(fence.ReplaceAllString(md, ""), "")
	var out []string
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		h := m[1]
		switch {
		case dated.MatchString(h):
			out = append(out, "heading with a date: "+h)
		case session.MatchString(h):
			out = append(out, "heading that names a session: "+h)
		case strings.Contains(h, "wip/"):
			out = append(out, "heading that names a wip/ branch: "+h)
		case next.MatchString(h):
			out = append(out, "a Next heading: "+h)
		}
	}
	for _, m := range linkText.FindAllStringSubmatch(text, -1) {
		label, target := m[1], m[2]
		file, _, _ := strings.Cut(target, "#")
		switch {
		case !strings.Contains(target, "://") && file != "" &&
			strings.HasPrefix(path.Join(path.Dir(page), file)+"/", "notes/"):
			out = append(out, "link into notes/: "+target)
		case dated.MatchString(target):
			out = append(out, "link with a date: "+target)
		case session.MatchString(label) || session.MatchString(target):
			out = append(out, "link that names a session: "+m[0])
		case strings.Contains(target, "wip/") || strings.Contains(label, "wip/"):
			out = append(out, "link that names a wip/ branch: "+m[0])
		}
	}
	return out
}

// TestDocsAreNotTheNotebook fails when README.md or a page of docs/ links
// into notes/ or carries the notebook's marks (see notebookMarks): the
// narrative and the run history belong in notes/, and a product page states
// what is true now, each figure with its build and conditions.
func TestDocsAreNotTheNotebook(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("found no pages in docs/")
	}
	for i, p := range pages {
		pages[i] = "docs/" + p
	}
	pages = append(pages, "README.md")
	for _, page := range pages {
		for _, mark := range notebookMarks(page, read(t, filepath.Join("..", filepath.FromSlash(page)))) {
			t.Errorf("%s: %s (the notebook's narrative and run history belong in notes/; state the current product here)", page, mark)
		}
	}
}

func TestNotebookMarks(t *testing.T) {
	cases := map[string]struct {
		reason string
		page   string
		md     string
		want   []string
	}{
		"CurrentState": {
			reason: "A page that states the current product, each figure with its build, has no marks.",
			page:   "docs/convergence.md",
			md: "# Convergence\n## What a platform sets\nRun core with `--max-concurrent-reconciles=10`: " +
				"all Ready in 30.13 s (build 8e77429, 2026-11-27; [benchmarks.md](benchmarks.md#end-to-end-on-the-local-control-plane)).\n" +
				"## Next steps for a platform team\nA heading that only starts with the word Next is not a to-do list.\n",
			want: nil,
		},
		"DatedHeadings": {
			reason: "Headings with a date, a session or a wip/ branch narrate the work.",
			page:   "docs/convergence.md",
			md: "## 2026-11-27 (fourth session): keys with the widget\n### Run of 2026-11-25\n" +
				"## The sixth session\n## Branch wip/keys-with-widget\n## Next\n## Next: the tail\n## Next (2026-11-25)\n",
			want: []string{
				"heading with a date: 2026-11-27 (fourth session): keys with the widget",
				"heading with a date: Run of 2026-11-25",
				"heading that names a session: The sixth session",
				"heading that names a wip/ branch: Branch wip/keys-with-widget",
				"a Next heading: Next",
				"a Next heading: Next: the tail",
				"heading with a date: Next (2026-11-25)",
			},
		},
		"Links": {
			reason: "Links into notes/ and to dated or session anchors point into the notebook.",
			page:   "docs/install.md",
			md: "[history](../notes/runs.md#run-1-in-detail) " +
				"[log](../notes/convergence-log.md) " +
				"[why](convergence.md#2026-11-27-fifth-session-ten-concurrent-reconciles) " +
				"[the sixth session](convergence.md#why) " +
				"[branch](https://github.com/widgetco/crossplane-widget/tree/wip/keys-with-widget) " +
				"[session.go](../provider/internal/clients/session.go)\n",
			want: []string{
				"link into notes/: ../notes/runs.md#run-1-in-detail",
				"link into notes/: ../notes/convergence-log.md",
				"link with a date: convergence.md#2026-11-27-fifth-session-ten-concurrent-reconciles",
				"link that names a session: [the sixth session](convergence.md#why)",
				"link that names a wip/ branch: [branch](https://github.com/widgetco/crossplane-widget/tree/wip/keys-with-widget)",
			},
		},
		"READMELinks": {
			reason: "From README.md, notes/ is a sibling directory, not a parent.",
			page:   "README.md",
			md:     "[notes](notes/README.md) and [benchmarks](docs/benchmarks.md)\n",
			want:   []string{"link into notes/: notes/README.md"},
		},
		"NotALinkIntoNotes": {
			reason: "A page named like notes/ elsewhere, a URL and code are not the notebook.",
			page:   "docs/install.md",
			md: "[release notes](release-notes.md) [x](https://example.com/notes/a.md)\n" +
				"`## 2026-11-27 session`\n```\n## 2026-11-27 (fourth session)\n[log](../notes/convergence-log.md)\n```\n",
			want: nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, notebookMarks(tc.page, tc.md)); diff != "" {
				t.Errorf("%s\nnotebookMarks(%q, ...): -want, +got:\n%s", tc.reason, tc.page, diff)
			}
		})
	}
}

// layerBenchmark is a layer's benchmark in TestLayerSavings: a page and
// anchor relative to docs/.
var layerBenchmark = regexp.MustCompile(`benchmark:\s+"([^"]+)"`)

// TestLayerBenchmarksResolve fails when a benchmark that TestLayerSavings
// (provider/internal/mrsetup/layers_test.go) names for a layer, relative to
// docs/, is not a page with that heading: a layer that saves nothing in one
// life must name a measurement that exists.
func TestLayerBenchmarksResolve(t *testing.T) {
	src := read(t, filepath.Join("..", "provider", "internal", "mrsetup", "layers_test.go"))
	found := layerBenchmark.FindAllStringSubmatch(src, -1)
	if len(found) == 0 {
		t.Fatal("found no benchmark in layers_test.go: the pattern is broken")
	}
	for _, m := range found {
		file, anchor, _ := strings.Cut(m[1], "#")
		p := filepath.FromSlash(file)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("layers_test.go names benchmark %s: %v", m[1], err)
			continue
		}
		if anchor != "" && !anchors(read(t, p))[anchor] {
			t.Errorf("layers_test.go names benchmark %s: %s has no heading with anchor #%s", m[1], file, anchor)
		}
	}
}
