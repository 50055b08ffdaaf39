#!/usr/bin/env bash
# Fails when `go generate ./...` changes any file (generated code and CRDs
# must be committed up to date), or when go.mod/go.sum are not tidy. It
# fingerprints the tree, regenerates, and compares, so it works on a dirty
# checkout too (the regenerated files are left in place for you to commit).
set -euo pipefail
cd "$(dirname "$0")/.."

fingerprint() {
	# Every non-ignored file, tracked or not, with its content hash.
	git ls-files -co --exclude-standard -z | sort -z | xargs -0 -r sha256sum 2>/dev/null
}

before=$(mktemp)
after=$(mktemp)
trap 'rm -f "$before" "$after"' EXIT
fingerprint >"$before"
go generate ./...
fingerprint >"$after"
if ! diff -u "$before" "$after" >/dev/null; then
	echo "check-diff: generated files were stale. 'go generate ./...' changed:" >&2
	diff "$before" "$after" | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "Run 'make generate' and commit the result." >&2
	exit 1
fi
echo "check-diff: generated files are up to date."

# go.mod and go.sum must be tidy, here and in every tools module: a
# requirement marked // indirect that the code imports, or one nothing
# needs, is drift too.
untidy=()
for dir in . tools/*/; do
	if ! (cd "$dir" && go mod tidy -diff >/dev/null 2>&1); then
		untidy+=("${dir%/}")
	fi
done
if ((${#untidy[@]} > 0)); then
	echo "check-diff: go.mod/go.sum are not tidy in: ${untidy[*]}" >&2
	echo "Run 'go mod tidy' there and commit the result." >&2
	exit 1
fi
echo "check-diff: go.mod and go.sum are tidy (module and tools/*)."
