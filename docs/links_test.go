package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pending are pages that README.md and docs/ link to while another change
// writes them. Remove an entry once its page exists.
var pending = map[string]bool{}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// anchors returns the anchors GitHub gives the headings of md: lower case,
// spaces to hyphens, punctuation other than hyphens and underscores dropped,
// "-1", "-2"... for repeats.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(md, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestRelativeLinksResolve fails when a relative link in README.md,
// docs/*.md, notes/*.md or examples/composition/README.md names a file that
// does not exist, or a heading that the linked page does not have.
func TestRelativeLinksResolve(t *testing.T) {
	root := ".."
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := filepath.Glob(filepath.Join(root, "notes", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, notes...)
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "examples", "composition", "README.md"))
	for _, page := range pages {
		md := read(t, page)
		text := codeSpan.ReplaceAllString(fence.ReplaceAllString(md, ""), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				t.Fatal(err)
			}
			rel = filepath.ToSlash(rel)
			if _, err := os.Stat(path); err != nil {
				if !pending[rel] {
					t.Errorf("%s links to %s: %s does not exist", page, target, rel)
				}
				continue
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchors(read(t, path))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", page, target, rel, anchor)
			}
		}
	}
}

func TestAnchors(t *testing.T) {
	md := "# Install and upgrade\n## Upgrade from a `v1alpha1`-only provider\n" +
		"## Conversion webhook: v1alpha1 <-> v1beta1 (issue 14)\n## provider-widget: 1,000 new Widgets to Ready\n" +
		"```\n# not a heading\n```\n## Run 1 in detail\n## Run 1 in detail\n"
	want := []string{
		"install-and-upgrade",
		"upgrade-from-a-v1alpha1-only-provider",
		"conversion-webhook-v1alpha1---v1beta1-issue-14",
		"provider-widget-1000-new-widgets-to-ready",
		"run-1-in-detail",
		"run-1-in-detail-1",
	}
	got := anchors(md)
	for _, a := range want {
		if !got[a] {
			t.Errorf("anchors(...) has no %q; got %v", a, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors(...) = %v, want exactly %v", got, want)
	}
}
