#!/usr/bin/env bash
# hack/fuzz.sh - run every Go fuzz target in the module for a set time.
#
# The targets are found, not listed by hand: every `func FuzzXxx(f
# *testing.F)` in a package under the given patterns (default ./...). Their
# seed corpora already run in `make test` (go test runs seeds as plain
# tests); this script mutates beyond them. A failing input is written by go
# test to the package's testdata/fuzz/<Target>/ directory: commit it, and it
# becomes a seed that every later `go test` replays.
#
# Usage: bash hack/fuzz.sh [FUZZTIME] [package patterns...]
#   FUZZTIME  per target, as go test -fuzztime takes it (default 30s)
set -euo pipefail

fuzztime=${1:-30s}
shift || true
pkgs=("${@:-./...}")

failed=()
n=0
while read -r pkg; do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	# Only packages whose tests declare fuzz targets are listed.
	grep -lqs '^func Fuzz[A-Z0-9_]' "$dir"/*_test.go || continue
	while read -r target; do
		[[ $target == Fuzz* ]] || continue
		n=$((n + 1))
		printf 'fuzz: %s %s for %s\n' "$pkg" "$target" "$fuzztime" >&2
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
			failed+=("$pkg $target")
		fi
	done < <(go test -list '^Fuzz' "$pkg")
done < <(go list "${pkgs[@]}")

if ((n == 0)); then
	echo "fuzz: no fuzz targets found under ${pkgs[*]}" >&2
	exit 1
fi
if ((${#failed[@]} > 0)); then
	printf 'fuzz: FAILED %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz: ${n} targets ran ${fuzztime} each without a failure" >&2
