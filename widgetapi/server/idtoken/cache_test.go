package idtoken

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestVerifiedCache(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	skew := 30 * time.Second
	c := newVerifiedCache(2)
	id := Identity{Project: "p"}
	c.put("tok", cachedIdentity{id: id, until: t0.Add(2 * time.Minute), exp: t0.Add(45 * time.Second), nbf: t0.Add(40 * time.Second)})
	hit := func(raw string, at time.Duration) bool { _, ok := c.get(raw, t0.Add(at), skew); return ok }
	// nbf 40s is within the 30s skew from 10s on; exp 45s until 75s.
	got := []bool{
		hit("tok", 0),
		hit("tok", 9*time.Second),
		hit("tok", 10*time.Second),
		hit("tok", 74*time.Second),
		hit("tok", 75*time.Second),
		hit("other", 30*time.Second),
	}
	want := []bool{false, false, true, true, false, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hits over time, -want, +got:\n%s", diff)
	}

	long := cachedIdentity{id: id, until: t0.Add(CachedTokenTTL), exp: t0.Add(time.Hour)}
	c.put("tok", long)
	if hit("tok", CachedTokenTTL) {
		t.Error("a token is trusted past CachedTokenTTL without verifying it again")
	}
	for i := range 10 {
		c.put(strconv.Itoa(i), long)
	}
	if n := len(c.m); n != 2 || len(c.order) != 2 {
		t.Errorf("entries after 10 puts with room for 2: %d (order %d)", n, len(c.order))
	}
	if !hit("9", 0) || hit("0", 0) {
		t.Error("the oldest entries should go first")
	}
}
