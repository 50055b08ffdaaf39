package conversionwebhook

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLimitListenerPerAddress checks what happens to one address's
// connections beyond its share: they wait, are served in turn as the
// address's own connections close, and are closed when they wait too long
// or too many wait.
func TestLimitListenerPerAddress(t *testing.T) {
	raw, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitListener(raw, 8, 1, 300*time.Millisecond)
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	next := func(within time.Duration) net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(within):
			return nil
		}
	}
	// closedByServer reports whether the server closed c within d.
	closedByServer := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}

	dial()
	first := next(time.Second)
	if first == nil {
		t.Fatal("the address's first connection: want it accepted, it was not")
	}

	second := dial()
	got := next(100 * time.Millisecond)
	if diff := cmp.Diff(true, got == nil); diff != "" {
		t.Errorf("a second connection while the address holds its share: want it to wait (nil), -want, +got:\n%s", diff)
	}
	_ = first.Close()
	served := next(time.Second)
	if served == nil {
		t.Fatal("the waiting connection once the first closed: want it accepted, it was not")
	}
	if diff := cmp.Diff(second.LocalAddr().String(), served.RemoteAddr().String()); diff != "" {
		t.Errorf("the connection accepted once the first closed: want the waiting one, -want, +got:\n%s", diff)
	}

	// served holds the share now: four more wait, a fifth is closed at once.
	waiting := []net.Conn{dial(), dial(), dial(), dial()}
	time.Sleep(100 * time.Millisecond)
	if diff := cmp.Diff(true, closedByServer(dial(), time.Second)); diff != "" {
		t.Errorf("a connection beyond the four that may wait: want it closed at once, -want, +got:\n%s", diff)
	}
	for i, c := range waiting {
		if diff := cmp.Diff(true, closedByServer(c, 2*time.Second)); diff != "" {
			t.Errorf("waiting connection %d: want it closed after waiting 300ms, -want, +got:\n%s", i, diff)
		}
	}
	if c := next(0); c != nil {
		t.Errorf("no connection should have been accepted while the address held its share, got one from %s", c.RemoteAddr())
	}
}
