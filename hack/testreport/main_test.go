package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// events renders go test -json lines: action, test, output.
func events(es ...[3]string) string {
	var b strings.Builder
	for _, e := range es {
		j, _ := json.Marshal(event{Action: e[0], Package: "example.com/p", Test: e[1], Output: e[2]})
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestReport(t *testing.T) {
	// Two parallel tests whose lines interleave, one of which fails.
	interleaved := events(
		[3]string{"run", "TestA", ""},
		[3]string{"output", "TestA", "=== RUN   TestA\n"},
		[3]string{"output", "TestA", "    a_test.go:1: step one\n"},
		[3]string{"output", "TestB", "=== RUN   TestB\n"},
		[3]string{"output", "TestB", "    b_test.go:1: noise\n"},
		[3]string{"output", "TestA", "    a_test.go:9: 3 writes after Ready\n"},
		[3]string{"output", "TestA", "--- FAIL: TestA (1.00s)\n"},
		[3]string{"fail", "TestA", ""},
		[3]string{"output", "TestB", "--- PASS: TestB (1.00s)\n"},
		[3]string{"pass", "TestB", ""},
		[3]string{"output", "", "FAIL\n"},
		[3]string{"output", "", "FAIL\texample.com/p\t2.0s\n"},
		[3]string{"fail", "", ""},
	)
	cases := map[string]struct {
		reason  string
		in      string
		verbose bool
		out     string
		digest  string
	}{
		"AllPass": {
			reason: "A passing run prints its package results and no digest.",
			in: events(
				[3]string{"output", "TestA", "=== RUN   TestA\n"},
				[3]string{"output", "TestA", "    a_test.go:1: fine\n"},
				[3]string{"output", "TestA", "--- PASS: TestA (0.00s)\n"},
				[3]string{"pass", "TestA", ""},
				[3]string{"output", "", "PASS\n"},
				[3]string{"output", "", "ok  \texample.com/p\t0.1s\n"},
				[3]string{"pass", "", ""},
			),
			out: "ok  \texample.com/p\t0.1s\n",
		},
		"QuietFailure": {
			reason: "Without -v a failed test's output is printed when it fails, a passed test's never; the digest repeats the failed test's own lines without the others'.",
			in:     interleaved,
			out: "    a_test.go:1: step one\n    a_test.go:9: 3 writes after Ready\n--- FAIL: TestA (1.00s)\n" +
				"FAIL\nFAIL\texample.com/p\t2.0s\n",
			digest: "\n=== FAILURES: 1; what each printed, on its own (last 80 lines each) ===\n" +
				"FAILED example.com/p TestA:\n    a_test.go:1: step one\n    a_test.go:9: 3 writes after Ready\n--- FAIL: TestA (1.00s)\n",
		},
		"VerboseFailure": {
			reason:  "With -v everything is printed as it comes, and the digest is the same.",
			in:      interleaved,
			verbose: true,
			out: "=== RUN   TestA\n    a_test.go:1: step one\n=== RUN   TestB\n    b_test.go:1: noise\n    a_test.go:9: 3 writes after Ready\n--- FAIL: TestA (1.00s)\n--- PASS: TestB (1.00s)\n" +
				"FAIL\nFAIL\texample.com/p\t2.0s\n",
			digest: "\n=== FAILURES: 1; what each printed, on its own (last 80 lines each) ===\n" +
				"FAILED example.com/p TestA:\n    a_test.go:1: step one\n    a_test.go:9: 3 writes after Ready\n--- FAIL: TestA (1.00s)\n",
		},
		"PackageAlone": {
			reason: "A package that fails without a failed test (its TestMain, a timeout) shows its own output.",
			in: events(
				[3]string{"output", "", "panic: test timed out after 30m0s\n"},
				[3]string{"output", "", "FAIL\texample.com/p\t1800.0s\n"},
				[3]string{"fail", "", ""},
			),
			out: "panic: test timed out after 30m0s\nFAIL\texample.com/p\t1800.0s\n",
			digest: "\n=== FAILURES: 1; what each printed, on its own (last 80 lines each) ===\n" +
				"FAILED example.com/p:\npanic: test timed out after 30m0s\nFAIL\texample.com/p\t1800.0s\n",
		},
		"NotJSON": {
			reason: "A line outside the JSON is passed on as it is.",
			in:     "go: downloading example.com/q v1.0.0\n" + events([3]string{"output", "", "ok  \texample.com/p\t0.1s\n"}, [3]string{"pass", "", ""}),
			out:    "go: downloading example.com/q v1.0.0\nok  \texample.com/p\t0.1s\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			r := newReport(&out, tc.verbose)
			if err := run(strings.NewReader(tc.in), r); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.out, out.String()); diff != "" {
				t.Errorf("%s\noutput: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.digest, r.digest()); diff != "" {
				t.Errorf("%s\ndigest: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestTailIsBounded checks that a test printing a lot keeps only its last
// lines for the digest.
func TestTailIsBounded(t *testing.T) {
	es := make([][3]string, 0, 3*keep+1)
	for i := range 3 * keep {
		es = append(es, [3]string{"output", "TestLoud", fmt.Sprintf("    line %d\n", i)})
	}
	es = append(es, [3]string{"fail", "TestLoud", ""})
	r := newReport(&strings.Builder{}, false)
	if err := run(strings.NewReader(events(es...)), r); err != nil {
		t.Fatal(err)
	}
	got := r.tail[id{"example.com/p", "TestLoud"}]
	if len(got) != keep || got[0] != fmt.Sprintf("    line %d", 2*keep) || got[keep-1] != fmt.Sprintf("    line %d", 3*keep-1) {
		t.Errorf("kept %d lines, from %q to %q; want the last %d", len(got), got[0], got[len(got)-1], keep)
	}
}

func TestWriteDigest(t *testing.T) {
	f := filepath.Join(t.TempDir(), "failures.txt")
	if err := writeDigest(f, "--- TestA\n"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "--- TestA\n" {
		t.Fatalf("after a failure the file holds %q (%v), want the digest", b, err)
	}
	if err := writeDigest(f, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f); !os.IsNotExist(err) {
		t.Errorf("after a passing run the file is still there (%v), want it removed", err)
	}
}
