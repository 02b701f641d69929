package view

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDeciderIsPure holds the package's non-test files to STYLE.md: only
// these imports, no goroutines, no clock reads.
func TestDeciderIsPure(t *testing.T) {
	allowed := map[string]bool{
		"crypto/sha256": true, "encoding/binary": true, "errors": true, "fmt": true,
		"maps": true, "slices": true, "strings": true, "time": true,
	}
	clockReads := map[string]bool{"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true,
		"NewTimer": true, "NewTicker": true, "Tick": true, "Sleep": true}
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
				t.Errorf("%s imports %q, not allowed in the pure decider", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: goroutine started at %v", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && clockReads[n.Sel.Name] {
					t.Errorf("%s: reads the clock (time.%s) at %v", name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < 3 {
		t.Fatalf("checked only %d files; is the test running in the package directory?", checked)
	}
}
