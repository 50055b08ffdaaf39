// Package validate runs `crossplane beta validate` offline, for tests: the
// Crossplane CLI (CRANK_BIN) validates resources against XRDs and CRDs, with a
// cache that already holds Crossplane's own CRDs (CROSSPLANE_CRDS) under the
// image name it is told to use, so it downloads nothing. hack/tools.sh env
// sets both variables.
package validate

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CrossplaneImage names Crossplane's CRDs in the validate cache; its tag is
// the Crossplane core version the e2e tier runs.
const CrossplaneImage = "xpkg.crossplane.io/crossplane/crossplane:v2.4.2"

// Run validates resources (files or directories) against extensions (XRD
// and CRD files or directories), with paths relative to dir, and returns
// what the CLI printed. It skips t when the tools are not there.
func Run(t testing.TB, dir string, extensions, resources []string) (string, error) {
	t.Helper()
	crank, crds := os.Getenv("CRANK_BIN"), os.Getenv("CROSSPLANE_CRDS")
	if crank == "" || crds == "" {
		t.Skip(`CRANK_BIN or CROSSPLANE_CRDS is not set: run eval "$(bash hack/tools.sh env)" (after make tools) to validate with the Crossplane CLI`)
	}
	cache := t.TempDir()
	repo, tag, _ := strings.Cut(strings.TrimPrefix(CrossplaneImage, "xpkg.crossplane.io/"), ":")
	if err := os.CopyFS(filepath.Join(cache, "xpkg.crossplane.io", repo+"@"+tag), os.DirFS(crds)); err != nil {
		t.Fatalf("cannot seed the validate cache with Crossplane's CRDs: %v", err)
	}
	//nolint:gosec // runs the pinned Crossplane CLI from hack/tools.sh on this repository's files
	cmd := exec.CommandContext(t.Context(), crank, "beta", "validate", strings.Join(extensions, ","), strings.Join(resources, ","),
		"--cache-dir", cache, "--crossplane-image", CrossplaneImage)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Clean reports whether the CLI's output says every resource is valid.
func Clean(out string) bool {
	return strings.Contains(out, " 0 failure cases") && !strings.Contains(out, "[x]")
}
