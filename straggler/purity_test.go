package straggler

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDecisionCodeIsPure holds the package's non-test files to STYLE.md:
// only allowed imports, no clock reads, no goroutines, no global random
// source.
func TestDecisionCodeIsPure(t *testing.T) {
	allowed := map[string]bool{
		"cmp": true, "encoding/json": true, "errors": true, "fmt": true, "math": true, "slices": true,
		"sort": true, "strconv": true, "strings": true, "time": true,
		"gonum.org/v1/gonum/blas": true, "gonum.org/v1/gonum/blas/blas64": true,
	}
	forbiddenCalls := map[string]bool{"time.Now": true, "time.Since": true, "time.Sleep": true, "time.After": true,
		"time.NewTimer": true, "time.Tick": true, "rand.Float64": true, "rand.IntN": true, "rand.Int": true}
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
				t.Errorf("%s imports %q, not allowed in pure decision code", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: goroutine started at %v", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && forbiddenCalls[id.Name+"."+n.Sel.Name] {
					t.Errorf("%s: %s.%s at %v", name, id.Name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked only %d files; is the test running in the package directory?", checked)
	}
}
