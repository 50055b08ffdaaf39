//go:build linux

package cluster

import (
	"os"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/node"
)

// EnableEnv turns the real-node tests on ("1", as `make test` sets it) or
// off ("0" or unset).
const EnableEnv = "E2E_NODE"

// howTo is how to give the real-node tests what they need.
const howTo = "run them as root after `bash hack/tools.sh` and with eval \"$(bash hack/tools.sh env)\" (make test does both), or set " + EnableEnv + "=0 to leave them out"

// ErrDisabled says the real-node tests are off.
var ErrDisabled = errors.New("a real-node test: " + EnableEnv + "=1 runs it (make test sets it)")

// Requirements returns the cluster's tools when EnableEnv is "1": an error
// naming what is missing on a machine that cannot run a node (not root, no
// cgroup v1 or overlayfs) or without the tools, ErrDisabled when EnableEnv
// is not "1".
func Requirements() (Tools, error) {
	if os.Getenv(EnableEnv) != "1" {
		return Tools{}, ErrDisabled
	}
	if err := node.Check(); err != nil {
		return Tools{}, errors.Errorf("%v: %s", err, howTo)
	}
	tools, err := ToolsFromEnv()
	if err != nil {
		return Tools{}, errors.Errorf("%v: %s", err, howTo)
	}
	return tools, nil
}

// Require returns the cluster's tools for a real-node test. It skips t
// unless EnableEnv is "1"; when it is, it fails t, naming what is missing,
// on a machine that cannot run a node (not root, no cgroup v1 or
// overlayfs) or without the tools: never a silent fallback.
func Require(t testing.TB) Tools {
	t.Helper()
	tools, err := Requirements()
	switch {
	case errors.Is(err, ErrDisabled):
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	return tools
}
