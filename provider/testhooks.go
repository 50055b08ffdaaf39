//go:build testhooks

package main

import (
	"os"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
)

// testHooks are the flags only a test build has: the tests build
// provider-widget with -tags testhooks (test/lib/proc.Build); the packages
// Crossplane installs are built without the tag and carry none of this.
type testHooks struct {
	TestClockFile string `type:"path" help:"Test builds only: a file holding a Go duration (e.g. 25h) by which the clock that schedules key rotations runs ahead, so that a test reaches rotations due in hours without waiting."`
}

// minRefusedTokenPause is 0 in a test build: a test shows what the pause
// prevents by running without it.
func (testHooks) minRefusedTokenPause() time.Duration { return 0 }

// applyTo runs the reconcilers' rotation schedules on the test clock.
func (h testHooks) applyTo(d *mrsetup.Deps, log logging.Logger) {
	if h.TestClockFile == "" {
		return
	}
	log.Info("Key rotation schedules use a test clock", "file", h.TestClockFile)
	d.Now = fileClock(h.TestClockFile)
}

// fileClock returns a clock that runs ahead of time.Now by the duration
// written in file, read at every call; a file that is missing or does not
// hold a duration means no offset.
func fileClock(file string) func() time.Time {
	return func() time.Time {
		now := time.Now()
		b, err := os.ReadFile(file) //nolint:gosec // the test's own file
		if err != nil {
			return now
		}
		d, err := time.ParseDuration(strings.TrimSpace(string(b)))
		if err != nil {
			return now
		}
		return now.Add(d)
	}
}
