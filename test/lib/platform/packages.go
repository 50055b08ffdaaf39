package platform

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/harness"
)

// module is this repository's Go module, which FindRoot looks for.
const module = "github.com/widgetco/crossplane-widget"

// FindRoot returns the repository root: the nearest directory at or above
// the working directory whose go.mod declares this module.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", errors.Wrap(err, "cannot get working directory")
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+module+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.Errorf("cannot find the repository root: no go.mod of %s at or above the working directory", module)
		}
		dir = parent
	}
}

// Binaries are the runtime binaries the harness runs for the packages.
type Binaries struct {
	Provider string
	Function string
}

// FindBinaries returns the binaries `make build` writes to _output/bin, or
// an error naming that target when one is missing.
func FindBinaries(root string) (Binaries, error) {
	b := Binaries{
		Provider: filepath.Join(root, "_output", "bin", "provider-widget"),
		Function: filepath.Join(root, "_output", "bin", "function-widget"),
	}
	var missing []string
	for _, p := range []string{b.Provider, b.Function} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return b, errors.Errorf("missing %s: run `make build`", strings.Join(missing, " and "))
	}
	return b, nil
}

// Packages are the package files of provider-widget and function-widget.
type Packages struct {
	Provider string
	Function string
	// Version tags the packages in the loopback registry.
	Version string
	// Built is true when the packages were built from package/ because
	// _output/xpkg had none.
	Built bool
}

// FindPackages returns the packages to install. It prefers what the package
// target writes, _output/xpkg/{provider,function}-widget-<version>-<GOARCH>.xpkg:
// the newest provider package and the function package of the same version
// (or else the newest). Without those it builds minimal packages (no runtime
// image: the harness is the runtime) into dir with crank, from
// package/provider (crossplane.yaml, crds/) and package/function
// (crossplane.yaml, input/), generating a crossplane.yaml where package/ has
// none.
//
// The fallback only bridges the time before the package target exists;
// delete it (and minimalMeta) then.
func FindPackages(ctx context.Context, root, crank, dir string) (Packages, error) {
	xpkg := filepath.Join(root, "_output", "xpkg")
	p := Packages{Provider: newest(xpkg, "provider-widget"), Function: newest(xpkg, "function-widget")}
	if p.Provider != "" && p.Function != "" {
		p.Version = versionOf(p.Provider, "provider-widget")
		// The function package of the same build, when there is one.
		if f := filepath.Join(xpkg, "function-widget-"+p.Version+"-"+runtime.GOARCH+".xpkg"); isFile(f) {
			p.Function = f
		}
		return p, nil
	}
	p = Packages{Version: "v0.0.0-local", Built: true}
	for _, pk := range []struct {
		name, content string
		out           *string
	}{
		{"provider", "crds", &p.Provider},
		{"function", "input", &p.Function},
	} {
		src := filepath.Join(root, "package", pk.name)
		stage := filepath.Join(dir, pk.name+"-widget")
		if err := copyDir(filepath.Join(src, pk.content), filepath.Join(stage, pk.content)); err != nil {
			return p, errors.Wrapf(err, "cannot stage the %s package", pk.name)
		}
		meta, err := os.ReadFile(filepath.Join(src, "crossplane.yaml"))
		if os.IsNotExist(err) {
			meta, err = []byte(minimalMeta[pk.name]), nil
		}
		if err != nil {
			return p, errors.Wrapf(err, "cannot read the %s package's crossplane.yaml", pk.name)
		}
		if err := os.WriteFile(filepath.Join(stage, "crossplane.yaml"), meta, 0o600); err != nil {
			return p, errors.Wrapf(err, "cannot stage the %s package", pk.name)
		}
		*pk.out = filepath.Join(dir, pk.name+"-widget.xpkg")
		if err := harness.BuildPackage(ctx, crank, harness.PackageBuild{Root: stage, Out: *pk.out}); err != nil {
			return p, err
		}
	}
	return p, nil
}

// minimalMeta are the crossplane.yaml files FindPackages uses while
// package/ has none. The provider declares safe-start, as the real package
// does.
var minimalMeta = map[string]string{
	"provider": `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-widget
spec:
  crossplane:
    version: ">=v2.0.0"
  capabilities:
  - safe-start
`,
	"function": `apiVersion: meta.pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-widget
spec:
  crossplane:
    version: ">=v2.0.0"
`,
}

// newest returns the most recently written <dir>/<name>-*-<GOARCH>.xpkg, or
// "" when there is none.
func newest(dir, name string) string {
	m, _ := filepath.Glob(filepath.Join(dir, name+"-*-"+runtime.GOARCH+".xpkg"))
	type file struct {
		path string
		mod  int64
	}
	files := make([]file, 0, len(m))
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			files = append(files, file{p, fi.ModTime().UnixNano()})
		}
	}
	if len(files) == 0 {
		return ""
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod > files[j].mod })
	return files[0].path
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// versionOf extracts <version> from <dir>/<name>-<version>-<GOARCH>.xpkg.
func versionOf(path, name string) string {
	v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), name+"-"), "-"+runtime.GOARCH+".xpkg")
	if v == "" {
		return "v0.0.0-local"
	}
	return v
}

// copyDir copies the regular files directly in src to dst.
func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
