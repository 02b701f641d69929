package ringtail_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestEveryPackageHasADocGo holds docs/style.md's layout rule: every Go
// package of the repository says what it owns in a doc.go of its own.
func TestEveryPackageHasADocGo(t *testing.T) {
	var missing []string
	packages := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		hasGo, hasDoc := false, false
		for _, e := range entries {
			switch n := e.Name(); {
			case n == "doc.go":
				hasDoc = true
			case strings.HasSuffix(n, ".go"):
				hasGo = true
			}
		}
		if hasGo || hasDoc {
			packages++
		}
		if hasGo && !hasDoc {
			missing = append(missing, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if packages < 50 {
		t.Fatalf("found only %d Go packages: not the repository's root?", packages)
	}
	if len(missing) > 0 {
		t.Errorf("packages without a doc.go (say what the package owns and what it must not import): %s", strings.Join(missing, ", "))
	}
}

// docs/imports.md's import graph (design.md links it) is what `go list` says now
// (scripts/import-graph.sh prints it; paste its output after moving code).
func TestDesignImportGraphIsGoList(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	mod, err := exec.Command(goTool, "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(mod))
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	short := func(p string) string {
		if p == module {
			return "ringtail"
		}
		return strings.TrimPrefix(p, module+"/")
	}
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, "|")
		deps := ""
		for _, imp := range strings.Fields(imps) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				deps += " " + short(imp)
			}
		}
		if deps == "" {
			deps = " —"
		}
		want = append(want, fmt.Sprintf("%-26s ▶%s", short(pkg), deps))
	}
	doc, err := os.ReadFile("docs/imports.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "as `scripts/import-graph.sh` (`go list`) prints it:\n\n```\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("docs/imports.md: no import-graph block after \"as `scripts/import-graph.sh` (`go list`) prints it:\"")
	}
	got := strings.Split(strings.TrimSpace(block), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/imports.md's import graph differs from go list; paste scripts/import-graph.sh's output:\n%s", strings.Join(want, "\n"))
	}
}
