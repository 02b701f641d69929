package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/rta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

// Functions are named by their package's path in the module (the root
// package by its name) and Function or Type.Method: "gradcode.Survivors",
// "elastic/shard.Queue.Pull", "ringtail.RankOf".

// allow excuses functions that have callers the analysis cannot see, each
// with why. Keep it tiny: a function nothing calls is deleted, not listed.
var allow = map[string]string{
	// nvml.Fake, NVML's in-memory twin, is live: ringtail-train --fake-gpu
	// runs on it (issue 38), so its methods need no excuse.
}

// harnesses are the packages (by path below the module) whose tests are
// their program: their own tests count as callers.
var harnesses = map[string]string{
	"integration/faults": "the fault harness: make faults runs its tests (go test -tags faults)",
}

// tags are the build tags the module is loaded with, so that code behind
// them (and its callees) is seen: the fault harness's tests (faults). The
// NVML binding is in the default build (cgo on, no ringtail_nonvml).
var tags = []string{"faults"}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./internal/deadcode [packages] (default ./...)")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	dead, err := find(".", patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "deadcode:", err)
		os.Exit(2)
	}
	bad := 0
	for _, f := range dead {
		switch why, ok := allow[f.Name]; {
		case ok:
			fmt.Printf("%s: %s (allowed: %s)\n", f.Pos, f.Name, why)
		default:
			fmt.Printf("%s: %s\n", f.Pos, f.Name)
			bad++
		}
	}
	for _, name := range stale(dead) {
		fmt.Printf("allow-list entry %s is not dead: remove it\n", name)
		bad++
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "deadcode: %d functions without a caller (see internal/deadcode)\n", bad)
		os.Exit(1)
	}
}

// Finding is one function without a caller.
type Finding struct {
	Pos  string // file:line, relative to the working directory
	Name string // path/in/module.Function or path/in/module.Type.Method
}

// find loads patterns (in directory dir) with their tests and returns the
// dead functions, in file order.
func find(dir string, patterns []string) ([]Finding, error) {
	cfg := &packages.Config{Dir: dir, Mode: packages.LoadAllSyntax | packages.NeedModule, Tests: true,
		BuildFlags: []string{"-tags=" + strings.Join(tags, ",")}}
	initial, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	if packages.PrintErrors(initial) > 0 {
		return nil, fmt.Errorf("packages contain errors")
	}
	prog, _ := ssautil.AllPackages(initial, ssa.InstantiateGenerics)
	prog.Build()

	module := ""
	for _, p := range initial {
		if p.Module != nil && p.Module.Main {
			module = p.Module.Path
			break
		}
	}
	if module == "" {
		return nil, fmt.Errorf("no package of the main module")
	}
	posn := func(fn *ssa.Function) token.Position { return prog.Fset.Position(fn.Pos()) }

	// Production roots.
	var roots []*ssa.Function
	for _, p := range initial {
		if isTestVariant(p) {
			continue
		}
		sp := prog.Package(p.Types)
		if sp == nil {
			continue
		}
		if p.Name == "main" {
			roots = append(roots, sp.Func("init"), sp.Func("main"))
		}
		if p.PkgPath == module || strings.HasPrefix(p.PkgPath, module+"/examples/") {
			roots = append(roots, exportedAPI(prog, p.Types)...)
		}
		roots = append(roots, cgoExports(prog, p)...)
	}
	prod := rta.Analyze(nonNil(roots), false)
	live := map[token.Position]bool{}
	for fn := range prod.Reachable {
		live[posn(fn)] = true
	}

	// Tests of other packages: each package's tests, alone (a call graph
	// of every test at once would join them all through package testing's
	// calls of test functions), may make a function of another package
	// live, but not through functions of their own package that only they
	// reach.
	for _, p := range initial {
		if !isTestVariant(p) {
			continue
		}
		var testFuncs []*ssa.Function
		dir := ""
		for _, f := range p.Syntax {
			name := prog.Fset.File(f.Pos()).Name()
			if !strings.HasSuffix(name, "_test.go") {
				continue
			}
			dir = filepath.Dir(name)
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					testFuncs = append(testFuncs, prog.FuncValue(p.TypesInfo.Defs[fd.Name].(*types.Func)))
				}
			}
		}
		if sp := prog.Package(p.Types); sp != nil && len(testFuncs) > 0 {
			testFuncs = append(testFuncs, sp.Func("init"))
		}
		testFuncs = nonNil(testFuncs)
		if len(testFuncs) == 0 {
			continue
		}
		_, harness := harnesses[strings.TrimPrefix(strings.TrimSuffix(p.PkgPath, "_test"), module+"/")]
		graph := rta.Analyze(testFuncs, true).CallGraph
		seen := map[*callgraph.Node]bool{}
		var stack []*callgraph.Node
		for _, fn := range testFuncs {
			if n := graph.Nodes[fn]; n != nil && !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if fn := n.Func; fn != nil && fn.Pos().IsValid() {
				p := posn(fn)
				own := filepath.Dir(p.Filename) == dir && !strings.HasSuffix(p.Filename, "_test.go") && !harness
				if own && !live[p] {
					continue // the package's own code, reached only by its own tests: not a caller
				}
				if !own {
					live[p] = true
				}
			}
			for _, e := range n.Out {
				if !seen[e.Callee] {
					seen[e.Callee] = true
					stack = append(stack, e.Callee)
				}
			}
		}
	}

	// Every function declared in the module's non-test files.
	wd, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var dead []Finding
	reported := map[token.Position]bool{}
	for _, p := range initial {
		if isTestVariant(p) || !(p.PkgPath == module || strings.HasPrefix(p.PkgPath, module+"/")) {
			continue
		}
		for _, f := range p.Syntax {
			file := prog.Fset.File(f.Pos()).Name()
			if strings.HasSuffix(file, "_test.go") || ast.IsGenerated(f) {
				continue
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				obj := p.TypesInfo.Defs[fd.Name].(*types.Func)
				pos := prog.Fset.Position(obj.Pos())
				if live[pos] || reported[pos] || fd.Name.Name == "init" || fd.Name.Name == "main" && p.Name == "main" {
					continue
				}
				reported[pos] = true
				rel, err := filepath.Rel(wd, pos.Filename)
				if err != nil {
					rel = pos.Filename
				}
				name := relPath(module, p) + "." + funcName(obj)
				dead = append(dead, Finding{Pos: fmt.Sprintf("%s:%d", rel, pos.Line), Name: name})
			}
		}
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].Pos < dead[j].Pos })
	return dead, nil
}

// stale returns the allow-list entries that are not dead.
func stale(dead []Finding) []string {
	isDead := map[string]bool{}
	for _, f := range dead {
		isDead[f.Name] = true
	}
	var out []string
	for name := range allow {
		if !isDead[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// relPath is p's path in module; the root package is named by its name.
func relPath(module string, p *packages.Package) string {
	if p.PkgPath == module {
		return p.Name
	}
	return strings.TrimPrefix(p.PkgPath, module+"/")
}

// isTestVariant reports whether p is a package compiled for a test: a
// package with its _test.go files, an external test package, or a test
// main.
func isTestVariant(p *packages.Package) bool {
	return strings.Contains(p.ID, " [") || strings.HasSuffix(p.ID, ".test")
}

// exportedAPI returns the exported functions of pkg and the exported
// methods of its exported types (aliases included).
func exportedAPI(prog *ssa.Program, pkg *types.Package) []*ssa.Function {
	var out []*ssa.Function
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Func:
			out = append(out, prog.FuncValue(obj))
		case *types.TypeName:
			t := types.Unalias(obj.Type())
			if types.IsInterface(t) || obj.IsAlias() && !isNamed(t) {
				continue
			}
			if _, generic := t.(*types.Named); generic && t.(*types.Named).TypeParams().Len() > 0 {
				continue // methods of a generic type exist only instantiated
			}
			for _, tt := range []types.Type{t, types.NewPointer(t)} {
				ms := prog.MethodSets.MethodSet(tt)
				for i := range ms.Len() {
					if sel := ms.At(i); sel.Obj().Exported() {
						out = append(out, prog.MethodValue(sel))
					}
				}
			}
		}
	}
	return out
}

func isNamed(t types.Type) bool { _, ok := t.(*types.Named); return ok }

// cgoExports returns the functions of p exported to C with //export.
func cgoExports(prog *ssa.Program, p *packages.Package) []*ssa.Function {
	var out []*ssa.Function
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil {
				continue
			}
			for _, c := range fd.Doc.List {
				if strings.HasPrefix(c.Text, "//export ") {
					out = append(out, prog.FuncValue(p.TypesInfo.Defs[fd.Name].(*types.Func)))
					break
				}
			}
		}
	}
	return out
}

func nonNil(fns []*ssa.Function) []*ssa.Function {
	return slices.DeleteFunc(fns, func(fn *ssa.Function) bool { return fn == nil })
}

// funcName is Function or Type.Method.
func funcName(obj *types.Func) string {
	sig := obj.Type().(*types.Signature)
	if recv := sig.Recv(); recv != nil {
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := types.Unalias(t).(*types.Named); ok {
			return n.Obj().Name() + "." + obj.Name()
		}
	}
	return obj.Name()
}
