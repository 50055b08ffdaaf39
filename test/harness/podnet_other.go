//go:build !linux

package harness

import (
	"context"
	"net"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// podNet needs Linux namespaces; elsewhere pods cannot run.
type podNet struct{}

func newPodNet(string) (*podNet, error) {
	return nil, errors.New("pods need Linux network and UTS namespaces")
}

func (n *podNet) do(func() error) error { return errors.New("pods need Linux") }

func (n *podNet) listen(string) (net.Listener, error) { return nil, errors.New("pods need Linux") }

func (n *podNet) dial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("pods need Linux")
}

func (n *podNet) close() {}
