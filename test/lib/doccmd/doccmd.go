// Package doccmd finds the commands the user pages (README.md, docs/*.md,
// examples/**/README.md) tell a user to run, and how each is marked to be
// tested against a live `make demo`.
//
// A command is a line starting with "$ " in a fenced code block (the lines
// up to the next "$ " line or the block's end are the output the page
// shows), or a line of a ```sh, ```bash or ```shell block (full-line
// comments are not commands). A line ending with a backslash continues on
// the next one, and so do a pipe on the next line and a for/while/until/if
// up to its done/fi. Every block that holds a command is marked by an HTML
// comment on the line before its opening fence:
//
//	<!-- demo: run -->                  run against the live demo; output checked
//	<!-- demo: run, output varies -->   run; the output shown is an illustration
//	<!-- demo: skip: <reason> -->       not runnable against the demo, and why
//
// docs/commands_test.go fails on a block without a marker or a skip without
// a reason; TestDemo (test/demo) runs every "run" block.
package doccmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A Block is a fenced code block that holds at least one command.
type Block struct {
	Page string // repository-relative, slash-separated
	Line int    // of the opening fence, from 1
	// Mark is the marker's text after "demo:" ("run", "run, output varies",
	// "skip: reason"), "" when the line before the fence is not a marker.
	Mark string
	// Run, Varies and Skip are what Mark says; Skip is the reason.
	Run    bool
	Varies bool
	Skip   string
	// Commands in the order the page lists them.
	Commands []Command
}

// A Command is one command of a Block.
type Command struct {
	Line int    // of its first line, from 1
	Text string // without "$ " and the block's indentation; continuation lines included
	// Output is what the page shows after it ("$ " blocks only).
	Output []string
}

// Where is "page:line" of the block.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

// Problem is why the block's marker is not acceptable, "" when it is.
func (b Block) Problem() string {
	switch {
	case b.Mark == "":
		return "no <!-- demo: run --> or <!-- demo: skip: <reason> --> on the line before the block"
	case !b.Run && b.Skip == "":
		return fmt.Sprintf("marker %q: want run, run, output varies, or skip: <reason>", b.Mark)
	}
	return ""
}

var (
	fence  = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([\\w-]*)")
	marker = regexp.MustCompile(`^\s*<!--\s*demo:\s*(.*?)\s*-->\s*$`)
	opener = regexp.MustCompile(`^(for|while|until|if|case)\b`)
	closer = regexp.MustCompile(`(^|;)\s*(done|fi|esac)\b`)
)

// scripts are the languages of blocks whose every line is a command.
var scripts = map[string]bool{"sh": true, "bash": true, "shell": true}

// Parse returns the blocks of md, the page at repository-relative path
// page, that hold commands.
func Parse(page, md string) []Block {
	lines := strings.Split(md, "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, delim, lang := m[1], m[2], m[3]
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), delim) {
			end++
		}
		body := make([]string, 0, end-i-1)
		for _, l := range lines[i+1 : min(end, len(lines))] {
			body = append(body, strings.TrimPrefix(l, indent))
		}
		b := Block{Page: page, Line: i + 1, Commands: commands(body, i+2, scripts[lang])}
		if len(b.Commands) > 0 {
			if i > 0 {
				if mm := marker.FindStringSubmatch(lines[i-1]); mm != nil {
					b.Mark = mm[1]
				}
			}
			switch {
			case b.Mark == "run":
				b.Run = true
			case b.Mark == "run, output varies":
				b.Run, b.Varies = true, true
			case strings.HasPrefix(b.Mark, "skip:"):
				b.Skip = strings.TrimSpace(strings.TrimPrefix(b.Mark, "skip:"))
			}
			out = append(out, b)
		}
		i = end
	}
	return out
}

// commands splits a block's body (its first line is line first of the
// page) into commands.
func commands(body []string, first int, script bool) []Command {
	var out []Command
	for i := 0; i < len(body); i++ {
		l := body[i]
		var text string
		switch {
		case strings.HasPrefix(l, "$ "):
			text = strings.TrimPrefix(l, "$ ")
		case script && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			text = l
		default:
			if n := len(out); n > 0 && !script {
				out[n-1].Output = append(out[n-1].Output, l)
			}
			continue
		}
		c := Command{Line: first + i}
		depth := 0
		for {
			t := strings.TrimSpace(text)
			if opener.MatchString(t) {
				depth++
			}
			depth -= len(closer.FindAllString(t, -1))
			c.Text += text
			next := ""
			if i+1 < len(body) {
				next = strings.TrimSpace(body[i+1])
			}
			cont := strings.HasSuffix(text, "\\") ||
				(script && (depth > 0 || strings.HasPrefix(next, "|") || strings.HasPrefix(next, "&&")))
			if !cont || i+1 >= len(body) {
				break
			}
			i++
			text = body[i]
			c.Text += "\n"
		}
		out = append(out, c)
	}
	return out
}

// Pages returns the user pages under root, the repository: README.md,
// docs/*.md and every examples/**/README.md, repository-relative.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		pages = append(pages, "docs/"+filepath.Base(d))
	}
	err = filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "README.md" {
			r, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(r))
		}
		return nil
	})
	slices.Sort(pages[1:])
	return pages, err
}

// All parses every user page under root.
func All(root string) ([]Block, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, p := range pages {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		out = append(out, Parse(p, string(md))...)
	}
	return out, nil
}

// CheckOutput reports whether got, a command's output, agrees with shown,
// what the page shows after it. The rule: the first non-empty line the page
// shows must be a line of got, compared field by field (so spacing does not
// matter). A table header must then have exactly the columns shown (a
// column `crossplane beta trace` does not print fails), a value must be the
// value shown, and an error ("you must specify only one resource",
// NotFound) instead of the output fails. The page may elide the rest; an
// illustration is marked "output varies" and not checked.
func CheckOutput(shown []string, got string) error {
	want := ""
	for _, l := range shown {
		if strings.TrimSpace(l) != "" {
			want = l
			break
		}
	}
	if want == "" {
		return nil
	}
	fields := strings.Fields(want)
	for l := range strings.SplitSeq(got, "\n") {
		if slices.Equal(strings.Fields(l), fields) {
			return nil
		}
	}
	return fmt.Errorf("the output has no line %q (the first line the page shows, compared field by field)", strings.Join(fields, " "))
}
