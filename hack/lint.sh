#!/usr/bin/env bash
# hack/lint.sh - run golangci-lint (built and cached by hack/tools.sh) on the
# module, from a path that is the same for every clone.
#
# golangci-lint keys its cache by each file's absolute path as well as its
# content. CI lints a fresh clone at a new path every time, so without this
# every run misses the cache and lints the whole module again: about 190 s of
# CPU on this project against about 2 s with a warm cache (docs/development.md
# has the measurement). Lint therefore runs through a symbolic link at a fixed
# place in the user's cache directory that points at this clone; go resolves
# files under the link's path (it trusts $PWD), so two clones with the same
# content share cache entries. A lock keeps two clones from moving the link
# under each other.
#
# Usage: bash hack/lint.sh [golangci-lint run flags]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd -P)
lint=$(bash "$root/hack/tools.sh" path golangci-lint)
base=${XDG_CACHE_HOME:-${HOME}/.cache}/crossplane-widget
link=$base/lint-root

mkdir -p "$base"
exec 9>"$base/lint-root.lock"
flock 9

# Replace the link itself (-n), never what an old link points at.
ln -sfn "$root" "$link"
cd "$link"
"$lint" run --allow-serial-runners "$@" ./...
