//go:build !testhooks

package main

import (
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
)

// testHooks is empty in the packages: the hooks are in testhooks.go, which
// only test builds (-tags testhooks) compile.
type testHooks struct{}

// minRefusedTokenPause is the shortest --refused-token-pause: the pause
// keeps one namespace's refused token from getting the provider's address
// throttled for every tenant (docs/tenancy.md).
func (testHooks) minRefusedTokenPause() time.Duration { return time.Second }

func (testHooks) applyTo(*mrsetup.Deps, logging.Logger) {}
