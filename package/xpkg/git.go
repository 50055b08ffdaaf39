package xpkg

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Commit identifies what a build packages.
type Commit struct {
	// Version is the semantic version of the commit (see Semver), as the
	// Makefile's VERSION: v1.2.3 on a tag, v1.2.4-dev.5.gabcdef0 five commits
	// after it, v0.0.0-dev.42.gabcdef0 when no tag precedes it, with -dirty
	// appended when the work tree has changes.
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
	if c.Revision, err = git(ctx, dir, "rev-parse", "HEAD"); err != nil {
		return c, errors.Wrap(err, "cannot get the commit hash")
	}
	short, err := git(ctx, dir, "rev-parse", "--short=7", "HEAD")
	if err != nil {
		return c, errors.Wrap(err, "cannot get the commit hash")
	}
	// --dirty makes describe compare the work tree with HEAD; the tag part is
	// read separately because describe fails without a matching tag.
	desc, err := git(ctx, dir, "describe", "--always", "--dirty", "--abbrev=7")
	if err != nil {
		return c, errors.Wrap(err, "cannot describe the commit")
	}
	dirty := Dirty(desc)
	tag, n := "", 0
	if d, err := git(ctx, dir, "describe", "--tags", "--long", "--abbrev=7", "--match", "v[0-9]*.[0-9]*.[0-9]*"); err == nil {
		tag, n, err = splitDescribe(d)
		if err != nil {
			return c, err
		}
	} else {
		count, err := git(ctx, dir, "rev-list", "--count", "HEAD")
		if err != nil {
			return c, errors.Wrap(err, "cannot count the commits")
		}
		if n, err = strconv.Atoi(count); err != nil {
			return c, errors.Errorf("git rev-list --count HEAD printed %q, not a number", count)
		}
	}
	if c.Version, err = Semver(tag, n, short, dirty); err != nil {
		return c, err
	}
	ct, err := git(ctx, dir, "log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return c, errors.Wrap(err, "cannot get the commit time")
	}
	c.Time, err = ParseEpoch(ct)
	return c, err
}

// splitDescribe splits `git describe --long` output, <tag>-<n>-g<hash>, into
// the tag and the number of commits since it.
func splitDescribe(d string) (string, int, error) {
	i := strings.LastIndex(d, "-g")
	j := strings.LastIndex(d[:max(i, 0)], "-")
	if i < 0 || j < 0 {
		return "", 0, errors.Errorf("cannot parse git describe output %q", d)
	}
	n, err := strconv.Atoi(d[j+1 : i])
	if err != nil {
		return "", 0, errors.Errorf("cannot parse git describe output %q", d)
	}
	return d[:j], n, nil
}

// Semver returns the semantic version of a commit n commits after tag (""
// when no release tag precedes it; n then counts every commit), with hash its
// abbreviated hash. Crossplane resolves a Configuration's dependencies by
// semantic version, so every build gets one, ordered as the commits are:
//
//   - on a release tag: the tag, v1.2.3;
//   - after one: a pre-release of the next patch, v1.2.4-dev.5.gabcdef0,
//     which sorts after v1.2.3 and before v1.2.4; after a pre-release tag
//     v1.3.0-rc.1: v1.3.0-rc.1.dev.5.gabcdef0;
//   - without a tag: v0.0.0-dev.42.gabcdef0;
//   - with uncommitted changes: -dirty appended, v1.2.4-dev.5.gabcdef0-dirty.
//
// Build metadata (+...) of a tag is dropped: an OCI tag cannot hold '+'.
func Semver(tag string, n int, hash string, dirty bool) (string, error) {
	if n < 0 {
		return "", errors.Errorf("commit count %d is negative", n)
	}
	v := semver.New(0, 0, 0, "", "")
	if tag != "" {
		var err error
		if v, err = semver.StrictNewVersion(strings.TrimPrefix(tag, "v")); err != nil {
			return "", errors.Errorf("tag %q is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE]", tag)
		}
	}
	out := "v" + semver.New(v.Major(), v.Minor(), v.Patch(), v.Prerelease(), "").String()
	if tag == "" || n > 0 {
		dev := "dev." + strconv.Itoa(n) + ".g" + hash
		switch {
		case tag == "":
			out = "v0.0.0-" + dev
		case v.Prerelease() != "":
			out += "." + dev
		default:
			out = "v" + v.IncPatch().String() + "-" + dev
		}
	}
	if dirty {
		out += "-dirty"
	}
	if _, err := semver.StrictNewVersion(strings.TrimPrefix(out, "v")); err != nil {
		return "", errors.Errorf("cannot make a semantic version of tag %q, %d commits and hash %q", tag, n, hash)
	}
	return out, nil
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
