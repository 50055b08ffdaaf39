package harness

import (
	"context"
	"io"
	"net"
	"time"
)

// forward accepts connections on l and pipes each to what dial returns,
// until l is closed.
func forward(l net.Listener, dial func(ctx context.Context) (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := dial(ctx)
			cancel()
			if err != nil {
				_ = in.Close()
				return
			}
			pipe(in, out)
		}()
	}
}

// pipe copies both ways until either side is done, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	_ = a.Close()
	_ = b.Close()
}
