package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/citest"
)

// The rules on a small module: what the command, the root package's API,
// an interface call and another package's tests reach is live; a function
// only its own package's tests call is dead, and so is what only it calls.
// (The analysis's one blind spot shows too: an exported method of a type
// that becomes an interface value counts as reachable, since reflection
// could call it.)
func TestTheRules(t *testing.T) {
	dead, err := find("testdata/fix", []string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range dead {
		got = append(got, f.Name)
	}
	want := []string{
		"fix.unexported", "fix.T.m", "lib.OwnTestOnly", "lib.reachedByDead",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("dead:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoCodeWithoutACaller runs the check over the module: every function
// needs a caller outside its own package's tests (see main.go for the
// rules). It runs the command with the go tool, not in this test binary,
// so that -race does not slow the whole-program analysis.
func TestNoCodeWithoutACaller(t *testing.T) {
	if testing.Short() {
		t.Skip("analyses the whole module (half a minute and more)")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(goTool, "env", "CGO_ENABLED").Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		citest.Missing(t, "needs cgo (gcc): the NVML binding (and its callers' view of it) is compiled with cgo only")
	}
	cmd := exec.Command(goTool, "run", "./internal/deadcode")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("functions without a caller (delete them, or give them one):\n%s", out)
	}
}
