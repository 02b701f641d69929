package purity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// isClock reports whether time.<name> reads or waits on the clock.
func isClock(name string) bool {
	switch name {
	case "Now", "Since", "Until", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Sleep":
		return true
	}
	return false
}

// isSeeded reports whether rand.<name> makes a seeded source or names a
// type, rather than drawing from the global source.
func isSeeded(name string) bool {
	switch name {
	case "New", "NewPCG", "NewSource", "NewChaCha8", "NewZipf", "PCG", "Rand", "Source", "ChaCha8", "Zipf":
		return true
	}
	return false
}

// Check parses the non-test .go files of the test's working directory (the
// package directory under go test) and reports every import outside
// allowed, every go statement, every time.<clock function> and every call
// of a math/rand top-level function other than a constructor. It fails if
// it found fewer than minFiles files, so a misplaced call cannot pass by
// checking nothing.
func Check(t testing.TB, allowed []string, minFiles int) {
	t.Helper()
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[a] = true
	}
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
		randNames := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !ok[path] {
				t.Errorf("%s imports %q, not allowed in pure decision code", name, path)
			}
			if path == "math/rand" || path == "math/rand/v2" {
				local := "rand"
				if imp.Name != nil {
					local = imp.Name.Name
				}
				randNames[local] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: goroutine started at %v", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				id, isIdent := n.X.(*ast.Ident)
				if !isIdent {
					break
				}
				if id.Name == "time" && isClock(n.Sel.Name) {
					t.Errorf("%s: clock read time.%s at %v", name, n.Sel.Name, fset.Position(n.Pos()))
				}
				if randNames[id.Name] && !isSeeded(n.Sel.Name) {
					t.Errorf("%s: global random source %s.%s at %v", name, id.Name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < minFiles {
		t.Fatalf("checked only %d files (want at least %d): is the test running in the package directory?", checked, minFiles)
	}
}
