// Command testreport reads `go test -json` on its standard input, prints the
// run as go test would, and ends with what each failed test printed, on its
// own. A long run's log ends with many lines of summaries, and the lines of
// parallel tests interleave; CI shows its end. With this digest, the end of
// the log names every failure with its messages.
//
//	go test -json ./... | go run ./hack/testreport [-v] [-o FILE]
//
// Without -v it prints what go test prints without -v: each package's
// result, and the output of failed tests only. With -v it prints everything,
// as it comes. -o also writes the digest to FILE (removed when nothing
// failed), so that a caller running several suites can print all digests
// last. It exits 1 when a test or a package failed; run it under pipefail so
// that go test's own status counts too.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// keep bounds what is kept of one test's output for the digest: its last
// lines, where a failure's messages are.
const keep = 80

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// id names a test of a package; Test is empty for the package itself.
type id struct{ Package, Test string }

// report follows a run.
type report struct {
	verbose bool
	out     io.Writer

	// tail is the last lines each test printed, without the framing lines
	// (=== RUN and the like).
	tail map[id][]string
	// held is what a test printed so far, while not verbose: printed if it
	// fails, dropped if it passes.
	held map[id][]string
	// failed are the failed tests and packages, in the order they failed.
	failed []id
	// err is the first error writing to out.
	err error
}

// print writes s to out, remembering the first error.
func (r *report) print(s string) {
	if _, err := io.WriteString(r.out, s); err != nil && r.err == nil {
		r.err = err
	}
}

func newReport(out io.Writer, verbose bool) *report {
	return &report{verbose: verbose, out: out, tail: map[id][]string{}, held: map[id][]string{}}
}

// add takes one event.
func (r *report) add(e event) {
	k := id{e.Package, e.Test}
	switch e.Action {
	case "output", "build-output":
		r.output(k, e.Output)
	case "fail", "build-fail":
		r.failed = append(r.failed, k)
		r.release(k, true)
	case "pass", "skip":
		r.release(k, false)
	}
}

func (r *report) output(k id, line string) {
	switch {
	case r.verbose:
		r.print(line)
	case k.Test == "":
		// go test without -v prints a passing package's result alone.
		if strings.TrimSpace(line) != "PASS" {
			r.print(line)
		}
	case !framing(line) || strings.HasPrefix(strings.TrimSpace(line), "--- FAIL"):
		r.held[k] = append(r.held[k], line)
	}
	if framing(line) {
		return
	}
	r.tail[k] = append(r.tail[k], strings.TrimRight(line, "\n"))
	if t := r.tail[k]; len(t) > keep {
		r.tail[k] = t[len(t)-keep:]
	}
}

// release prints what a test held back if it failed, and forgets it.
func (r *report) release(k id, print bool) {
	if print {
		for _, l := range r.held[k] {
			r.print(l)
		}
	}
	delete(r.held, k)
	if !print {
		delete(r.tail, k)
	}
}

// framing reports whether a line is go test's own framing of a test's
// output rather than something the test printed.
func framing(line string) bool {
	l := strings.TrimSpace(line)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return l == "" || l == "PASS" || l == "FAIL"
}

// digest is what the failed tests and packages printed, each on its own.
func (r *report) digest() string {
	if len(r.failed) == 0 {
		return ""
	}
	// A failed test's parent and package add nothing when all they
	// printed is their own result.
	testFailed := map[string]bool{}
	shown := make([]id, 0, len(r.failed))
	for _, k := range r.failed {
		if k.Test != "" {
			testFailed[k.Package] = true
		}
	}
	for _, k := range r.failed {
		if (k.Test == "" && testFailed[k.Package]) || onlyResults(r.tail[k]) {
			continue
		}
		shown = append(shown, k)
	}
	if len(shown) == 0 {
		shown = r.failed
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== FAILURES: %d; what each printed, on its own (last %d lines each) ===\n", len(shown), keep)
	for _, k := range shown {
		name := k.Package
		if k.Test != "" {
			name += " " + k.Test
		}
		fmt.Fprintf(&b, "FAILED %s:\n", name)
		for _, l := range r.tail[k] {
			fmt.Fprintf(&b, "%s\n", l)
		}
	}
	return b.String()
}

// onlyResults reports whether lines are only go test's results of a test
// or package (--- FAIL, FAIL and the like).
func onlyResults(lines []string) bool {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "--- FAIL") && !strings.HasPrefix(l, "FAIL") && l != "exit status 1" {
			return false
		}
	}
	return true
}

// run reads events from in until its end.
func run(in io.Reader, r *report) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A line outside go test's JSON (go itself reporting
			// before the tests run): passed on. go test's exit status
			// reports the failure it may be.
			r.print(sc.Text() + "\n")
			continue
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return r.err
}

func main() {
	verbose := flag.Bool("v", false, "print every test's output as it comes, as go test -v does")
	file := flag.String("o", "", "also write the digest of failures to this file (removed when nothing failed)")
	flag.Parse()

	r := newReport(os.Stdout, *verbose)
	if err := run(os.Stdin, r); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: cannot read go test's output: %v\n", err)
		os.Exit(1)
	}
	d := r.digest()
	fmt.Print(d)
	if *file != "" {
		if err := writeDigest(*file, d); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(1)
		}
	}
	if d != "" {
		os.Exit(1)
	}
}

// writeDigest writes d to file, or removes file when d is empty.
func writeDigest(file, d string) error {
	if d == "" {
		if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("cannot remove %s: %w", file, err)
		}
		return nil
	}
	if err := os.WriteFile(file, []byte(d), 0o600); err != nil {
		return fmt.Errorf("cannot write the digest of failures: %w", err)
	}
	return nil
}
