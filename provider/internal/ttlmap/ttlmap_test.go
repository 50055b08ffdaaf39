package ttlmap

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMap(t *testing.T) {
	type get struct {
		v  string
		ok bool
	}
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason string
		ttl    time.Duration
		put    bool          // put "a" = "x" at t0
		del    bool          // then delete it
		after  time.Duration // then get "a" this long after t0
		want   get
	}{
		"Fresh":       {reason: "A value younger than the TTL is returned.", ttl: time.Minute, put: true, after: 59 * time.Second, want: get{"x", true}},
		"Expired":     {reason: "A value as old as the TTL is not.", ttl: time.Minute, put: true, after: time.Minute},
		"Deleted":     {reason: "A deleted value is not returned.", ttl: time.Minute, put: true, del: true},
		"Missing":     {reason: "A key never put has no value.", ttl: time.Minute},
		"NoTTLKeeps0": {reason: "With a TTL of zero nothing is kept.", ttl: 0, put: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New[string, string](tc.ttl)
			now := t0
			m.SetClock(func() time.Time { return now })
			if tc.put {
				m.Put("a", "x")
			}
			if tc.del {
				m.Delete("a")
			}
			now = t0.Add(tc.after)
			v, ok := m.Get("a")
			if diff := cmp.Diff(tc.want, get{v, ok}, cmp.AllowUnexported(get{})); diff != "" {
				t.Errorf("%s\nGet(a): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestMapSweeps checks that the map does not keep entries nobody asks for
// again (the Secrets of resources that are gone, widgets read once at a
// poll): expired ones are dropped by the time the map has doubled, and none
// that is still fresh.
func TestMapSweeps(t *testing.T) {
	const ttl = 30 * time.Second
	start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	now := start
	m := New[string, int](ttl)
	m.SetClock(func() time.Time { return now })
	for i := range 1000 {
		m.Put(fmt.Sprintf("old-%d", i), i)
	}
	now = start.Add(ttl)
	for i := range 1100 {
		m.Put(fmt.Sprintf("new-%d", i), i)
	}
	if got := m.Len(); got != 1100 {
		t.Errorf("%d entries after 1,000 expired and 1,100 were put, want 1,100: expired ones are kept", got)
	}
	for i := range 1100 {
		if _, ok := m.Get(fmt.Sprintf("new-%d", i)); !ok {
			t.Fatalf("new-%d, put just now, was dropped", i)
		}
	}

	// Keys that keep changing, one a second: the map stays near the
	// number put in one TTL.
	for i := range 1000 {
		now = now.Add(time.Second)
		m.Put(fmt.Sprint(i), i)
	}
	if n := m.Len(); n > 200 {
		t.Errorf("%d entries after 1,000 puts a second apart with a 30 s TTL, want at most a few dozen", n)
	}
}

func TestMapDeleteFunc(t *testing.T) {
	m := New[[2]string, int](time.Minute)
	m.Put([2]string{"c1", "a"}, 1)
	m.Put([2]string{"c1", "b"}, 2)
	m.Put([2]string{"c2", "a"}, 3)
	m.DeleteFunc(func(k [2]string) bool { return k[0] == "c1" })
	if _, ok := m.Get([2]string{"c2", "a"}); !ok || m.Len() != 1 {
		t.Errorf("DeleteFunc(conn c1): %d entries left, want only c2's", m.Len())
	}
}
