package docs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

// emitted are the reasons of the code whose reasons troubleshooting.md
// must explain, loaded once for all tests.
var emitted = sync.OnceValues(func() (map[string]string, error) {
	return emittedReasons("..", "./provider/...", "./function/...")
})

func reasons(t *testing.T) map[string]string {
	t.Helper()
	found, err := emitted()
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestTroubleshootingNamesEveryReason fails when the provider or the function
// can emit a condition or event reason that docs/troubleshooting.md does not
// name in a code span (`Reason`). A new reason fails it until the page says
// what it means and what to do.
func TestTroubleshootingNamesEveryReason(t *testing.T) {
	found := reasons(t)
	page := read(t, "troubleshooting.md")
	for _, r := range missingReasons(page, found) {
		t.Errorf("troubleshooting.md does not name reason %q (emitted via %s): add it, in backticks, with what it means and what to do", r, found[r])
	}
}

// TestEmittedReasons pins the collector to reasons of each kind of source,
// so that a collector that finds nothing cannot pass the test above.
func TestEmittedReasons(t *testing.T) {
	found := reasons(t)
	for _, r := range []string{
		"DriftRepaired",           // event.Reason constant, provider
		"Resizing",                // xpv2.ConditionReason constant, provider
		"PolicyViolation",         // untyped constant in a rejection{reason: ...}, function
		"WaitingForWidget",        // untyped constant assigned to c.Reason, function
		"Available",               // xpv2.Available(), called by the provider
		"ReconcileError",          // xpv2.ReconcileError(err), called by the managed reconciler
		"CannotConnectToProvider", // event.Reason of managed.NewReconciler
		"UsageAccounting",         // event.Reason of providerconfig.NewReconciler
		"InUse",                   // ConditionReason of providerconfig.NewReconciler
	} {
		if _, ok := found[r]; !ok {
			t.Errorf("emittedReasons(...) did not find %q; found %v", r, slices.Sorted(maps.Keys(found)))
		}
	}
}

func TestMissingReasons(t *testing.T) {
	page := "| `PolicyViolation` | ... |\nThe widget is Creating.\n```\nReason: Deleting\n```\n`Available=True`\n"
	got := missingReasons(page, map[string]string{"PolicyViolation": "", "Creating": "", "Deleting": "", "Available": ""})
	want := []string{"Available", "Creating", "Deleting"}
	if !slices.Equal(got, want) {
		t.Errorf("missingReasons(...) = %v, want %v (a reason counts only as a code span of its own)", got, want)
	}
}

// missingReasons returns, sorted, the reasons page does not name as a code
// span of their own: a word in prose or a line of captured output does not
// explain a reason.
func missingReasons(page string, reasons map[string]string) []string {
	spans := map[string]bool{}
	for _, s := range codeSpan.FindAllString(fence.ReplaceAllString(page, ""), -1) {
		spans[strings.Trim(s, "`")] = true
	}
	var out []string
	for r := range reasons {
		if !spans[r] {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// emittedReasons returns every condition and event reason the packages
// matching patterns (relative to dir) can emit, each with where it comes
// from. It finds them in the source, by type and by flow:
//
//   - constants of type event.Reason or xpv2.ConditionReason, declared or
//     used, and string constants named reason... or Reason... (the
//     function's reasons are untyped: function/fn/conditions.go);
//   - constant strings set as a field named Reason or reason (composite
//     literals and assignments: the function's conditions and rejections);
//   - the reason of each condition constructor called (xpv2.Available());
//   - the event.Reason and ConditionReason constants and the condition
//     constructors of each crossplane-runtime reconciler the code runs
//     (managed.NewReconciler).
func emittedReasons(dir string, patterns ...string) (map[string]string, error) {
	mode := packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo
	pkgs, err := packages.Load(&packages.Config{Mode: mode, Dir: dir}, patterns...)
	if err != nil {
		return nil, err
	}
	if packages.PrintErrors(pkgs) > 0 {
		return nil, errors.New("cannot load the packages whose reasons the page must name")
	}
	c := &collector{found: map[string]string{}, parsed: map[string]*parsedPkg{}, dirs: map[string]string{}}
	for _, p := range pkgs {
		c.fromTyped(p)
	}
	for _, r := range c.reconcilers {
		c.fromReconciler(r.dir, r.via)
	}
	if len(c.errs) > 0 {
		return nil, errors.New(strings.Join(c.errs, "\n"))
	}
	return c.found, nil
}

type collector struct {
	found       map[string]string     // reason -> where
	parsed      map[string]*parsedPkg // by directory
	dirs        map[string]string     // library import path -> directory
	reconcilers []struct{ dir, via string }
	errs        []string
}

// add records reason, and where it comes from: the first place in sort
// order, so that messages do not change from run to run.
func (c *collector) add(reason, where string) {
	if prev, ok := c.found[reason]; reason != "" && (!ok || where < prev) {
		c.found[reason] = where
	}
}

// isReasonType reports whether t is crossplane-runtime's event.Reason or a
// Crossplane ConditionReason.
func isReasonType(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	path, name := n.Obj().Pkg().Path(), n.Obj().Name()
	return (name == "Reason" && strings.HasSuffix(path, "crossplane-runtime/v2/pkg/event")) ||
		(name == "ConditionReason" && strings.HasPrefix(path, "github.com/crossplane/"))
}

// fromTyped collects the reasons of one type-checked package of ours.
func (c *collector) fromTyped(p *packages.Package) {
	info := p.TypesInfo
	where := func(n ast.Node) string { return relPos(p.Fset.Position(n.Pos())) }
	for _, obj := range info.Uses {
		if obj.Pkg() != nil && obj.Pkg() != p.Types && obj.Pos().IsValid() {
			c.dirs[obj.Pkg().Path()] = filepath.Dir(p.Fset.Position(obj.Pos()).Filename)
		}
	}
	for id, obj := range info.Defs {
		k, ok := obj.(*types.Const)
		if !ok || k.Val().Kind() != constant.String {
			continue
		}
		if isReasonType(k.Type()) || strings.HasPrefix(k.Name(), "reason") || strings.HasPrefix(k.Name(), "Reason") {
			c.add(constant.StringVal(k.Val()), where(id))
		}
	}
	constString := func(e ast.Expr) (string, bool) {
		tv, ok := info.Types[e]
		if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
			return "", false
		}
		return constant.StringVal(tv.Value), true
	}
	isReasonField := func(e ast.Expr) bool {
		var id *ast.Ident
		switch e := e.(type) {
		case *ast.Ident:
			id = e
		case *ast.SelectorExpr:
			id = e.Sel
		}
		return id != nil && (id.Name == "Reason" || id.Name == "reason")
	}
	for _, f := range p.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case ast.Expr:
				if tv, ok := info.Types[n]; ok && tv.Value != nil && isReasonType(tv.Type) {
					c.add(constant.StringVal(tv.Value), where(n))
				}
				if kv, ok := n.(*ast.KeyValueExpr); ok && isReasonField(kv.Key) {
					if s, ok := constString(kv.Value); ok {
						c.add(s, where(kv))
					}
				}
				if call, ok := n.(*ast.CallExpr); ok {
					c.fromCall(p, call)
				}
			case *ast.AssignStmt:
				if len(n.Lhs) != len(n.Rhs) {
					return true
				}
				for i, l := range n.Lhs {
					if s, ok := constString(n.Rhs[i]); ok && isReasonField(l) {
						c.add(s, where(n))
					}
				}
			}
			return true
		})
	}
}

// fromCall follows a call of ours into a library: a condition constructor
// gives its reason; a crossplane-runtime reconciler gives all of its own.
func (c *collector) fromCall(p *packages.Package, call *ast.CallExpr) {
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	case *ast.IndexExpr: // a generic function
		if s, ok := fun.X.(*ast.SelectorExpr); ok {
			id = s.Sel
		}
	}
	if id == nil {
		return
	}
	fn, ok := p.TypesInfo.Uses[id].(*types.Func)
	if !ok || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), "github.com/crossplane/") {
		return
	}
	dir := filepath.Dir(p.Fset.Position(fn.Pos()).Filename)
	via := strings.TrimPrefix(fn.Pkg().Path(), "github.com/crossplane/") + "." + fn.Name()
	sig := fn.Signature()
	switch {
	case sig.Recv() == nil && sig.Results().Len() == 1 && isConditionType(sig.Results().At(0).Type()):
		c.fromConstructor(dir, fn.Name(), via)
	case sig.Recv() == nil && fn.Name() == "NewReconciler" && strings.Contains(fn.Pkg().Path(), "/pkg/reconciler/"):
		c.reconcilers = append(c.reconcilers, struct{ dir, via string }{dir, via})
	}
}

func isConditionType(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == "Condition" && n.Obj().Pkg() != nil && strings.HasPrefix(n.Obj().Pkg().Path(), "github.com/crossplane/")
}

// A parsedPkg is a library package parsed, not type-checked: its files, and
// its string constants by name.
type parsedPkg struct {
	files  []*ast.File
	consts map[string]string
}

func (c *collector) parse(dir string) *parsedPkg {
	if pp, ok := c.parsed[dir]; ok {
		return pp
	}
	pp := &parsedPkg{consts: map[string]string{}}
	c.parsed[dir] = pp
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		c.errs = append(c.errs, err.Error())
		return pp
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			c.errs = append(c.errs, err.Error())
			continue
		}
		pp.files = append(pp.files, f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							pp.consts[n.Name] = s
						}
					}
				}
			}
		}
	}
	return pp
}

func stringLit(e ast.Expr) (string, bool) {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

// fromConstructor adds the reason that the condition constructor name of
// the package in dir sets (Reason: ReasonAvailable).
func (c *collector) fromConstructor(dir, name, via string) {
	pp := c.parse(dir)
	for _, f := range pp.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != name || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Reason" {
					return true
				}
				if id, ok := kv.Value.(*ast.Ident); ok {
					if s, ok := pp.consts[id.Name]; ok {
						c.add(s, via+"()")
						return true
					}
				}
				if s, ok := stringLit(kv.Value); ok {
					c.add(s, via+"()")
					return true
				}
				c.errs = append(c.errs, fmt.Sprintf("%s() in %s sets a reason this test cannot read; teach it", via, dir))
				return true
			})
			return
		}
	}
	c.errs = append(c.errs, fmt.Sprintf("cannot find %s() in %s", via, dir))
}

// fromReconciler adds every event.Reason and ConditionReason constant the
// reconciler package in dir declares and the reason of every condition
// constructor of Crossplane's condition package it calls
// (xpv2.ReconcileError(err)).
func (c *collector) fromReconciler(dir, via string) {
	pp := c.parse(dir)
	for _, f := range pp.files {
		imports := map[string]string{} // local name -> import path
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			name := filepath.Base(path)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				sel, ok := n.Type.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				event := sel.Sel.Name == "Reason" && strings.HasSuffix(imports[x.Name], "crossplane-runtime/v2/pkg/event")
				condition := sel.Sel.Name == "ConditionReason" && strings.HasPrefix(imports[x.Name], "github.com/crossplane/")
				if !event && !condition {
					return true
				}
				for i, id := range n.Names {
					if i < len(n.Values) {
						if s, ok := stringLit(n.Values[i]); ok {
							c.add(s, via+", whose package declares "+id.Name)
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok || !strings.HasSuffix(imports[x.Name], "/core/v2") || !strings.HasPrefix(imports[x.Name], "github.com/crossplane/") {
					return true
				}
				cd, ok := c.dirs[imports[x.Name]]
				if !ok {
					c.errs = append(c.errs, fmt.Sprintf("%s calls %s.%s of %s, which our code does not use: teach this test where it is", via, x.Name, sel.Sel.Name, imports[x.Name]))
					return true
				}
				if c.isConstructor(cd, sel.Sel.Name) {
					c.fromConstructor(cd, sel.Sel.Name, via+", which calls "+x.Name+"."+sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// isConstructor reports whether name is a function of the package in dir
// that returns a Condition.
func (c *collector) isConstructor(dir, name string) bool {
	for _, f := range c.parse(dir).files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != name || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
				continue
			}
			id, ok := fd.Type.Results.List[0].Type.(*ast.Ident)
			return ok && id.Name == "Condition"
		}
	}
	return false
}

// modCache is the module cache prefix of a library's file.
var modCache = regexp.MustCompile(`^.*/pkg/mod/`)

// relPos is a position relative to the repository root, or in the module
// cache for a library's.
func relPos(p token.Position) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(filepath.Dir(wd), p.Filename); err == nil && !strings.HasPrefix(rel, "..") {
			return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
		}
	}
	return modCache.ReplaceAllString(fmt.Sprintf("%s:%d", filepath.ToSlash(p.Filename), p.Line), "")
}
