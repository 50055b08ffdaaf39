package xpkg

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Commit identifies what a build packages.
type Commit struct {
	// Version is `git describe --tags --always --dirty`, as the Makefile's
	// VERSION: v1.2.3 on a tag, v1.2.3-4-gabcdef0 after it, abcdef0 without
	// tags, with -dirty when the work tree has changes.
	Version string
	// Revision is the full commit hash.
	Revision string
	// Time is the commit time, the images' creation time.
	Time time.Time
}

// Dirty reports whether v is the version of a work tree with uncommitted
// changes.
func Dirty(v string) bool { return strings.HasSuffix(v, "-dirty") }

// FromGit describes the commit checked out in dir.
func FromGit(ctx context.Context, dir string) (Commit, error) {
	var c Commit
	var err error
	if c.Version, err = git(ctx, dir, "describe", "--tags", "--always", "--dirty"); err != nil {
		return c, errors.Wrap(err, "cannot describe the commit")
	}
	if c.Revision, err = git(ctx, dir, "rev-parse", "HEAD"); err != nil {
		return c, errors.Wrap(err, "cannot get the commit hash")
	}
	ct, err := git(ctx, dir, "log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return c, errors.Wrap(err, "cannot get the commit time")
	}
	c.Time, err = ParseEpoch(ct)
	return c, err
}

// ParseEpoch parses Unix seconds, as in SOURCE_DATE_EPOCH or `git log
// --format=%ct`.
func ParseEpoch(s string) (time.Time, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, errors.Errorf("%q is not a time in Unix seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Wrapf(err, "git %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
