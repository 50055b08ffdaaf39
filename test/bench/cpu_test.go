//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procCPU is a process of the control plane whose CPU time is measured.
type procCPU struct {
	name string
	pid  int
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuTime is a process's user plus system CPU time (all its threads, not
// its children), or -1 when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name, field 2, may hold spaces and
// parentheses; the fields after its last ')' start with field 3.
func parseStatCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

func cpuSnapshot(ps []procCPU) map[string]time.Duration {
	m := make(map[string]time.Duration, len(ps))
	for _, p := range ps {
		m[p.name] = cpuTime(p.pid)
	}
	return m
}

func cpuDelta(before, after map[string]time.Duration) map[string]time.Duration {
	m := make(map[string]time.Duration, len(after))
	for k, a := range after {
		if b, ok := before[k]; ok && a >= 0 && b >= 0 {
			m[k] = a - b
		}
	}
	return m
}

// rssOf returns the VmRSS line of a process, in kB.
func rssOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
	}
	return -1
}

// findProcess returns the PID of a process whose executable's base name is
// exe and that has the argument arg, or 0.
func findProcess(exe, arg string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := cmdline(pid)
		if len(args) > 0 && filepath.Base(args[0]) == exe && slices.Contains(args[1:], arg) {
			return pid
		}
	}
	return 0
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// TestProcParsers checks the /proc parsing the e2e section relies on (it
// runs without WIDGET_BENCH).
func TestProcParsers(t *testing.T) {
	stat := "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 12 0"
	if got, want := parseStatCPU(stat), 3250*time.Millisecond; got != want {
		t.Errorf("parseStatCPU = %s, want %s", got, want)
	}
	if got := parseStatCPU("garbage"); got != -1 {
		t.Errorf("parseStatCPU(garbage) = %s, want -1", got)
	}
	if got := cpuTime(os.Getpid()); got < 0 {
		t.Errorf("cpuTime(self) = %s", got)
	}
}

// samplePeakRSS samples the VmRSS of process pid every interval until the
// returned func is called, which stops the sampling and returns the largest
// sample in KiB (including one taken at that moment).
func samplePeakRSS(pid int, interval time.Duration) func() int {
	done, result := make(chan struct{}), make(chan int, 1)
	go func() {
		peak := rssOf(pid)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- max(peak, rssOf(pid))
				return
			case <-t.C:
				peak = max(peak, rssOf(pid))
			}
		}
	}()
	return func() int {
		close(done)
		return <-result
	}
}
