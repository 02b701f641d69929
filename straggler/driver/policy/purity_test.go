package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPolicyCodeIsPure holds the package's files to STYLE.md §2: only
// allowed imports (no net, os, clock, logging, root package, inject), no
// clock reads, no goroutines, no global random source. ringtail sim runs
// this code at 4096 ranks and must get the plans the ranks get.
func TestPolicyCodeIsPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var pure []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			pure = append(pure, f)
		}
	}
	if len(pure) < 4 {
		t.Fatalf("found only %v; is the test running in the package directory?", pure)
	}
	allowed := map[string]bool{
		"cmp": true, "encoding/json": true, "errors": true, "fmt": true, "math": true, "slices": true, "strconv": true,
		"strings": true, "time": true,
		"github.com/ringtail-ml/ringtail/straggler": true, "github.com/ringtail-ml/ringtail/topology": true,
		"github.com/ringtail-ml/ringtail/balance": true,
	}
	forbidden := map[string]bool{"time.Now": true, "time.Since": true, "time.Sleep": true, "time.After": true,
		"time.NewTimer": true, "time.Tick": true, "time.Until": true, "rand.Float64": true, "rand.IntN": true, "rand.Int": true}
	fset := token.NewFileSet()
	for _, name := range pure {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
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
				if id, ok := n.X.(*ast.Ident); ok && forbidden[id.Name+"."+n.Sel.Name] {
					t.Errorf("%s: %s.%s at %v", name, id.Name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}
