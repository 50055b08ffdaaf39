package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRefreshAt(t *testing.T) {
	issued := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason  string
		expires time.Time
		every   time.Duration
		want    time.Time
	}{
		"OneHour": {
			reason:  "A one-hour token is refreshed after 48 minutes, 80% of its life, as a kubelet does.",
			expires: issued.Add(time.Hour),
			want:    issued.Add(48 * time.Minute),
		},
		"TenMinutes": {
			reason:  "The shortest token kube-apiserver issues is refreshed after 8 minutes.",
			expires: issued.Add(10 * time.Minute),
			want:    issued.Add(8 * time.Minute),
		},
		"TwoDays": {
			reason:  "A token that lasts longer than 30 hours is refreshed after 24 hours.",
			expires: issued.Add(48 * time.Hour),
			want:    issued.Add(24 * time.Hour),
		},
		"TestPeriod": {
			reason:  "A test's rotation period shorter than 80% of the life wins.",
			expires: issued.Add(10 * time.Minute),
			every:   20 * time.Second,
			want:    issued.Add(20 * time.Second),
		},
		"TestPeriodLonger": {
			reason:  "A test's rotation period never keeps a token past 80% of its life.",
			expires: issued.Add(10 * time.Minute),
			every:   time.Hour,
			want:    issued.Add(8 * time.Minute),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, refreshAt(issued, tc.expires, tc.every)); diff != "" {
				t.Errorf("\n%s\nrefreshAt(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWriteAtomic: a reader of a volume's file sees the old content or the
// new one, in full, whenever it reads, while the volume is written again
// and again; the files are links through ..data, and nothing of earlier
// writes is left behind.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	// Large enough that a non-atomic write would be seen half done.
	a := bytes.Repeat([]byte("a"), 1<<20)
	b := bytes.Repeat([]byte("b"), 1<<20)
	if err := writeAtomic(dir, map[string][]byte{"token": a, "extra/ca.crt": []byte("ca")}); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var bad atomic.Int64
	var reads atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			got, err := os.ReadFile(filepath.Join(dir, "token"))
			reads.Add(1)
			if err != nil || (!bytes.Equal(got, a) && !bytes.Equal(got, b)) {
				bad.Add(1)
			}
		}
	}()
	for i := range 50 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := writeAtomic(dir, map[string][]byte{"token": data}); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d of %d reads while the volume was written again saw an error or a partial file, want none", bad.Load(), reads.Load())
	}

	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	// The last write is a (i = 49), the one generation, ..data and token;
	// extra/, which the later writes lacked, is gone.
	if len(names) != 3 || names[1] != dataLink || names[2] != "token" {
		t.Errorf("volume directory holds %q, want one ..<timestamp> directory, ..data and token", names)
	}
	if l, err := os.Readlink(filepath.Join(dir, "token")); err != nil || l != filepath.Join(dataLink, "token") {
		t.Errorf("token is a link to %q (%v), want ..data/token", l, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "token")); !bytes.Equal(got, a) {
		t.Error("token does not hold what the last write wrote")
	}
	for _, name := range []string{"../escape", "/abs", "a/../../b", "..data"} {
		if err := writeAtomic(dir, map[string][]byte{name: []byte("x")}); err == nil {
			t.Errorf("path %q: want an error, got none", name)
		}
	}
}
