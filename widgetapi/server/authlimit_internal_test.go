package server

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAuthThrottleMemoryIsBounded: a flood of failing addresses cannot grow
// the throttle's table past its bound; the least recently failed addresses
// are forgotten first.
func TestAuthThrottleMemoryIsBounded(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAuthThrottle(1, 1, 100)
	for i := range 10000 {
		a.failed(netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.%d/32", i>>16, i>>8&0xff, i&0xff)), now)
	}
	type state struct {
		Addresses           int
		FirstWait, LastWait time.Duration
	}
	want := state{
		Addresses: 100,
		FirstWait: 0,           // forgotten
		LastWait:  time.Second, // still remembered, bucket empty
	}
	got := state{
		Addresses: a.addresses(),
		FirstWait: a.wait(netip.MustParsePrefix("10.0.0.0/32"), now),
		LastWait:  a.wait(netip.MustParsePrefix("10.0.39.15/32"), now), // address 9999
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after failures from 10000 addresses with room for 100: -want, +got:\n%s", diff)
	}
}

func TestClientAddr(t *testing.T) {
	cases := map[string]struct {
		reason string
		remote string
		want   netip.Prefix
	}{
		"IPv4":       {"an IPv4 address counts alone", "192.0.2.7:5555", netip.MustParsePrefix("192.0.2.7/32")},
		"IPv6":       {"an IPv6 address counts with its /64", "[2001:db8:1:2:3:4:5:6]:443", netip.MustParsePrefix("2001:db8:1:2::/64")},
		"IPv6Zone":   {"a zone does not make another address", "[fe80::1%eth0]:80", netip.MustParsePrefix("fe80::/64")},
		"Mapped":     {"an IPv4-mapped IPv6 address is the IPv4 address", "[::ffff:192.0.2.7]:1", netip.MustParsePrefix("192.0.2.7/32")},
		"NotAnAddr":  {"anything else shares one bucket", "pipe", netip.Prefix{}},
		"NoPort":     {"an address without a port shares it too", "192.0.2.7", netip.Prefix{}},
		"EmptyInput": {"as does no address at all", "", netip.Prefix{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, clientAddr(tc.remote), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestAuthThrottleTakeAndRefund: take charges an attempt before it is made
// and refuses one the bucket cannot pay for; refund gives a successful
// attempt back, and an address whose bucket is full again is forgotten.
func TestAuthThrottleTakeAndRefund(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	addr := netip.MustParsePrefix("192.0.2.7/32")
	a := newAuthThrottle(1, 2, 100)
	type state struct {
		Wait      time.Duration
		Addresses int
	}
	var got []state
	record := func(wait time.Duration) { got = append(got, state{Wait: wait, Addresses: a.addresses()}) }
	record(a.take(addr, now)) // 2 -> 1
	record(a.take(addr, now)) // 1 -> 0
	record(a.take(addr, now)) // refused, nothing charged
	a.refund(addr, now)       // 0 -> 1
	record(a.wait(addr, now))
	a.refund(addr, now) // 1 -> 2: full, forgotten
	record(a.wait(addr, now))
	a.refund(addr, now) // an address not remembered: nothing to do
	record(a.wait(addr, now))
	want := []state{
		{Wait: 0, Addresses: 1},
		{Wait: 0, Addresses: 1},
		{Wait: time.Second, Addresses: 1},
		{Wait: 0, Addresses: 1},
		{Wait: 0, Addresses: 0},
		{Wait: 0, Addresses: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("take and refund with a burst of 2, -want, +got:\n%s", diff)
	}
}
