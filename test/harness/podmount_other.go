//go:build !linux

package harness

import "github.com/crossplane/crossplane-runtime/v2/pkg/errors"

// mounts need Linux bind mounts; elsewhere pods cannot run.
type mounts struct{}

func (m *mounts) bind(string, string) error { return errors.New("pods need Linux") }

func (m *mounts) unmountUnder(string) error { return nil }

func (m *mounts) unmountAll() error { return nil }
