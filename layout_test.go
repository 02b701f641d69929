package ringtail_test

import (
	"io/fs"
	"os"
	"path/filepath"
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
