//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// inProcess is one Go benchmark of ./function/fn/, medians over -count runs.
type inProcess struct {
	name                  string
	nsOp, bytesOp, allocs float64
	p50, p99              float64 // ns, of single calls
	runs                  int
}

// benchInProcess runs the function's own Go benchmarks (BenchmarkRunFunction
// and BenchmarkRunFunctionNamespacePolicy of package fn, in its test files,
// which no other package can import) and parses their output.
func benchInProcess(t *testing.T, root string, count int) ([]inProcess, string) {
	t.Helper()
	args := []string{"test", "-run", "^$", "-bench", "BenchmarkRunFunction", "-benchmem", "-count", strconv.Itoa(count), "./function/fn/"}
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	res := parseBenchOutput(out)
	if len(res) == 0 {
		t.Fatalf("go %s printed no benchmark results:\n%s", strings.Join(args, " "), out)
	}
	return res, "go " + strings.Join(args, " ")
}

// parseBenchOutput reads `go test -bench` output: per benchmark, the
// medians of ns/op, B/op, allocs/op and the ns-p50 and ns-p99 metrics that
// BenchmarkRunFunction reports.
func parseBenchOutput(out []byte) []inProcess {
	type acc struct{ ns, b, a, p50, p99 []float64 }
	byName := map[string]*acc{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		a, ok := byName[name]
		if !ok {
			a = &acc{}
			byName[name] = a
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				a.ns = append(a.ns, v)
			case "B/op":
				a.b = append(a.b, v)
			case "allocs/op":
				a.a = append(a.a, v)
			case "ns-p50":
				a.p50 = append(a.p50, v)
			case "ns-p99":
				a.p99 = append(a.p99, v)
			}
		}
	}
	res := make([]inProcess, 0, len(order))
	for _, n := range order {
		a := byName[n]
		res = append(res, inProcess{
			name: n, nsOp: medianF(a.ns), bytesOp: medianF(a.b), allocs: medianF(a.a),
			p50: medianF(a.p50), p99: medianF(a.p99), runs: len(a.ns),
		})
	}
	return res
}
