//go:build !linux

package harness

import (
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// mounts need Linux bind mounts; elsewhere pods cannot run.
type mounts struct{}

func (m *mounts) bind(string, string) error { return errors.New("pods need Linux") }

func (m *mounts) unmountUnder(string) error { return nil }

func (m *mounts) unmountAll() error { return nil }

// RemoveDir removes dir, a directory a previous harness left.
func RemoveDir(dir string) error { return errors.Wrapf(os.RemoveAll(dir), "cannot remove %s", dir) }
