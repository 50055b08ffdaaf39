package platform

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/package/xpkg"
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

// Packages are the package files of provider-widget and function-widget.
type Packages struct {
	Provider string
	Function string
	// Version tags the packages in the loopback registry.
	Version string
}

// FindPackages returns the packages to install: what `make build` writes,
// _output/xpkg/{provider,function}-widget-<version>-<GOARCH>.xpkg - the
// newest provider package and the function package of the same version (or
// else the newest). Each embeds its runtime image, which Crossplane's
// Deployment runtime runs.
func FindPackages(root string) (Packages, error) {
	dir := filepath.Join(root, "_output", "xpkg")
	p := Packages{Provider: newest(dir, "provider-widget"), Function: newest(dir, "function-widget")}
	if p.Provider == "" || p.Function == "" {
		return Packages{}, errors.Errorf("no provider-widget and function-widget packages for %s in %s: run `make build`", runtime.GOARCH, dir)
	}
	p.Version = versionOf(p.Provider, "provider-widget")
	if _, err := xpkg.Constraint(p.Version); err != nil {
		return Packages{}, errors.Wrapf(err, "%s: run `make build` to build packages with a semantic version", p.Provider)
	}
	// The function package of the same build, when there is one.
	if f := filepath.Join(dir, "function-widget-"+p.Version+"-"+runtime.GOARCH+".xpkg"); isFile(f) {
		p.Function = f
	}
	return p, nil
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
