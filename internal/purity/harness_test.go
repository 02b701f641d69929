package purity

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The benchmark harnesses: bench/'s packages and internal/bench (the
// nccl-tests sweep), by path below the module.
func isHarness(pkg string) bool {
	return strings.HasPrefix(pkg, "bench/") || pkg == "internal/bench"
}

// mayImportHarness reports whether pkg (by path below the module) may
// import a harness: the commands and the harnesses themselves.
func mayImportHarness(pkg string) bool {
	return strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "bench/")
}

// harnessImports returns "importer ▶ harness" for every import of a
// harness by a package that may not import one; imports maps each
// package to the module's packages it imports, by path below the module.
func harnessImports(imports map[string][]string) []string {
	var bad []string
	for pkg, deps := range imports {
		for _, d := range deps {
			if isHarness(d) && !mayImportHarness(pkg) {
				bad = append(bad, pkg+" ▶ "+d)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestHarnessImportsCatchesAProductPackage(t *testing.T) {
	got := harnessImports(map[string][]string{
		"cmd/ringtail":   {"bench/recovery", "internal/bench", "elastic"},
		"bench/late":     {"internal/bench"},
		"elastic":        {"bench/recovery"},
		"straggler/sim":  {"internal/bench", "straggler"},
		"internal/bench": {"ringtail"},
	})
	want := []string{"elastic ▶ bench/recovery", "straggler/sim ▶ internal/bench"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Harnesses live outside the product packages (issue 32): only the
// commands and other harnesses import them (tests may: go list's Imports
// leaves test files out).
func TestOnlyCommandsAndBenchesImportHarnesses(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/ringtail-ml/ringtail/"
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		var deps []string
		for _, d := range f[1:] {
			if p, ok := strings.CutPrefix(d, mod); ok {
				deps = append(deps, p)
			}
		}
		imports[strings.TrimPrefix(f[0], mod)] = deps
	}
	if imports["cmd/ringtail"] == nil {
		t.Fatalf("go list found no cmd/ringtail imports: %q", out)
	}
	if bad := harnessImports(imports); len(bad) > 0 {
		t.Errorf("product packages import harnesses (move the code, or the harness to bench/):\n%s", strings.Join(bad, "\n"))
	}
}
