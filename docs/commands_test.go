package docs

import (
	"testing"

	"github.com/widgetco/crossplane-widget/test/lib/doccmd"
)

// TestCommandsAreMarked fails when a block of a user page (README.md,
// docs/*.md, examples/**/README.md) holds a command and says neither that
// TestDemo runs it against the live demo (<!-- demo: run -->) nor why not
// (<!-- demo: skip: <reason> -->), on the line before its fence: every
// command a page tells a user to run is run by a test, or says why it is
// not (package test/lib/doccmd).
func TestCommandsAreMarked(t *testing.T) {
	blocks, err := doccmd.All("..")
	if err != nil {
		t.Fatal(err)
	}
	run, skip := 0, 0
	for _, b := range blocks {
		if p := b.Problem(); p != "" {
			t.Errorf("%s: a block with the command %q: %s", b.Where(), b.Commands[0].Text, p)
			continue
		}
		if b.Run {
			run += len(b.Commands)
		} else {
			skip += len(b.Commands)
		}
	}
	if run == 0 {
		t.Error("no command is marked <!-- demo: run -->: the extractor or the markers are broken")
	}
	t.Logf("%d commands run against the demo by TestDemo, %d skipped with a reason", run, skip)
}
