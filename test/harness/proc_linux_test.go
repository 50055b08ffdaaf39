package harness

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// descendants returns the live processes below pid (children, their
// children, ...), read from /proc.
func descendants(pid int) map[int]string {
	children := map[int][]int{}
	names := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, name, state, ok := procStat(p)
		if !ok || state == "Z" {
			continue
		}
		children[ppid] = append(children[ppid], p)
		names[p] = name
	}
	out := map[int]string{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out[c] = names[c]
			queue = append(queue, c)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, _, state, ok := procStat(pid)
	return ok && state != "Z"
}

func procStat(pid int) (ppid int, name, state string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", "", false
	}
	s := string(b)
	// The name is in parentheses and may contain spaces.
	l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if l < 0 || r < l {
		return 0, "", "", false
	}
	fields := strings.Fields(s[r+1:])
	if len(fields) < 2 {
		return 0, "", "", false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, "", "", false
	}
	return ppid, s[l+1 : r], fields[0], true
}

// listeners returns the TCP addresses each of pids listens on.
func listeners(pids map[int]string) map[int][]string {
	byInode := listeningInodes()
	out := map[int][]string{}
	for pid := range pids {
		fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			if a, ok := byInode[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")]; ok {
				out[pid] = append(out[pid], a)
			}
		}
	}
	return out
}

// listeningAddrs returns every TCP address in LISTEN state on the machine.
func listeningAddrs() map[string]bool {
	out := map[string]bool{}
	for _, a := range listeningInodes() {
		out[a] = true
	}
	return out
}

// listeningInodes maps socket inodes to the address they listen on.
func listeningInodes() map[string]string {
	// /proc/net is the main thread's network namespace, which may be a
	// pod's: a pod's thread can be the main thread (see podNet). Read the
	// calling thread's, locked to it: an unlocked thread is in the host's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out := map[string]string{}
	for _, f := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		s := bufio.NewScanner(fh)
		s.Scan() // header
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A is LISTEN
				continue
			}
			if a, err := decodeProcAddr(fields[1]); err == nil {
				out[fields[9]] = a
			}
		}
		_ = fh.Close()
	}
	return out
}

// decodeProcAddr decodes /proc/net/tcp's "0100007F:1F90" (little-endian
// 32-bit words) into "127.0.0.1:8080".
func decodeProcAddr(s string) (string, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", fmt.Errorf("bad address %q", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", fmt.Errorf("bad port %q", s)
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

func TestDecodeProcAddr(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"IPv4Loopback": {reason: "/proc/net/tcp stores IPv4 little-endian.", in: "0100007F:1F90", want: "127.0.0.1:8080"},
		"IPv4Any":      {reason: "0.0.0.0 is the wildcard.", in: "00000000:0050", want: "0.0.0.0:80"},
		"IPv6Any":      {reason: "tcp6 uses four little-endian words.", in: "00000000000000000000000000000000:1F90", want: "[::]:8080"},
		"IPv6Loopback": {reason: "::1 is the last word.", in: "00000000000000000000000001000000:0016", want: "[::1]:22"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeProcAddr(tc.in)
			if err != nil {
				t.Fatalf("%s\ndecodeProcAddr(%q): %v", tc.reason, tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndecodeProcAddr(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

// TestProcessStop checks that stopping a Process stops everything it
// started (its process group), and that Kill and Start restart it.
func TestProcessStop(t *testing.T) {
	dir := t.TempDir()
	p := proc.New("sh", Command{Path: "/bin/sh", Args: []string{"-c", "sleep 300 & sleep 300 & wait"}, Dir: dir},
		os.Environ(), filepath.Join(dir, "sh.log"), slog.New(slog.DiscardHandler))
	for _, step := range []struct {
		name string
		stop func() error
	}{{"Stop", p.Stop}, {"Kill", p.Kill}} {
		if err := p.Start(); err != nil {
			t.Fatalf("Start(): %v", err)
		}
		var kids map[int]string
		for i := 0; i < 100 && len(kids) < 2; i++ {
			time.Sleep(50 * time.Millisecond)
			kids = descendants(p.PID())
		}
		if len(kids) < 2 {
			t.Fatalf("%s: want 2 sleeps below the shell, got %v", step.name, kids)
		}
		if err := step.stop(); err != nil {
			t.Fatalf("%s(): %v", step.name, err)
		}
		if p.Running() {
			t.Errorf("%s(): process still running", step.name)
		}
		for pid, name := range kids {
			if alive(pid) {
				t.Errorf("%s(): %s (pid %d) survived", step.name, name, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "=== proc:"); got != 2 {
		t.Errorf("log has %d start lines, want 2 (one per start)", got)
	}
}
