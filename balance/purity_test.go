package balance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSolversArePure holds the package's non-test files to STYLE.md: only
// allowed imports (no net, os, time, logging), no goroutines, and random
// numbers only from generators built from a caller's seed.
func TestSolversArePure(t *testing.T) {
	checkPure(t, map[string]bool{
		"cmp": true, "container/heap": true, "errors": true, "fmt": true, "math": true,
		"math/bits": true, "math/rand/v2": true, "slices": true,
		"gonum.org/v1/gonum/floats": true,
	}, 10)
}

func checkPure(t *testing.T, allowed map[string]bool, minFiles int) {
	t.Helper()
	seededOnly := map[string]bool{"New": true, "NewPCG": true, "Rand": true, "PCG": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %q, not allowed in pure code", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: goroutine started at %v", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "rand" && !seededOnly[n.Sel.Name] {
					t.Errorf("%s: global random source rand.%s at %v", name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < minFiles {
		t.Fatalf("checked only %d files; is the test running in the package directory?", checked)
	}
}
