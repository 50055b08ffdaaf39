package harness

import (
	"context"
	"net"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A podNet is what a pod sandbox gives its containers: a network namespace
// of its own, with only loopback (up), and a hostname of its own (a UTS
// namespace). One thread lives in both namespaces for the pod's life; every
// socket the harness opens inside the pod (listeners that forward to the
// host, dials for probes and port-forwards) and every process it starts in
// the pod is created from that thread, so each is born in the pod's
// namespaces.
//
// The thread goes back to the host's namespaces when the pod ends, rather
// than exiting: it may be the thread that started another child of this
// process (core, say), and Linux sends a child its parent-death signal when
// the thread that started it exits, not the process.
type podNet struct {
	reqs chan func()
	done chan struct{}
}

// newPodNet creates the namespaces and sets the hostname.
func newPodNet(hostname string) (*podNet, error) {
	n := &podNet{reqs: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go n.serve(hostname, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return n, nil
}

// serve is the pod's thread: it enters the pod's namespaces, reports on
// ready, runs requests until close, and goes back to the host's namespaces.
func (n *podNet) serve(hostname string, ready chan<- error) {
	runtime.LockOSThread()
	host, err := openNamespaces()
	if err != nil {
		runtime.UnlockOSThread()
		ready <- err
		return
	}
	defer host.close()
	// Unlock only once back home; a thread that cannot go home ends with
	// this goroutine.
	goHome := func() {
		if host.restore() == nil {
			runtime.UnlockOSThread()
		}
	}
	if err := enterPodNamespaces(hostname); err != nil {
		goHome()
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case fn := <-n.reqs:
			fn()
		case <-n.done:
			goHome()
			return
		}
	}
}

// namespaces are open handles on a thread's network and UTS namespaces.
type namespaces struct{ net, uts int }

func openNamespaces() (*namespaces, error) {
	netFD, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.Wrap(err, "cannot open the host's network namespace")
	}
	utsFD, err := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(netFD)
		return nil, errors.Wrap(err, "cannot open the host's UTS namespace")
	}
	return &namespaces{net: netFD, uts: utsFD}, nil
}

// restore moves the calling thread back into the namespaces.
func (ns *namespaces) restore() error {
	if err := unix.Setns(ns.net, unix.CLONE_NEWNET); err != nil {
		return err
	}
	return unix.Setns(ns.uts, unix.CLONE_NEWUTS)
}

func (ns *namespaces) close() {
	_ = unix.Close(ns.net)
	_ = unix.Close(ns.uts)
}

func enterPodNamespaces(hostname string) error {
	if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWUTS); err != nil {
		return errors.Wrap(err, "cannot create the pod's network and UTS namespaces (the harness needs root)")
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return errors.Wrap(err, "cannot set the pod's hostname")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return errors.Wrap(err, "cannot open a socket in the pod's network namespace")
	}
	defer unix.Close(fd) //nolint:errcheck // Nothing to do about it.
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return errors.Wrap(err, "cannot name the loopback interface")
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return errors.Wrap(err, "cannot read the pod's loopback flags")
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return errors.Wrap(unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr), "cannot bring the pod's loopback up")
}

// do runs fn on the pod's thread.
func (n *podNet) do(fn func() error) error {
	errc := make(chan error, 1)
	select {
	case n.reqs <- func() { errc <- fn() }:
	case <-n.done:
		return errors.New("the pod's network namespace is gone")
	}
	return <-errc
}

// listen listens on addr inside the pod.
func (n *podNet) listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, errors.Wrapf(err, "cannot listen on %s in the pod", addr)
}

// dial connects to addr inside the pod.
func (n *podNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// close ends the pod's thread. Sockets and processes still in the
// namespaces keep them alive until they end.
func (n *podNet) close() {
	select {
	case <-n.done:
	default:
		close(n.done)
	}
}
