package launch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePython writes an executable python3 into dir that exits with code
// (the find_spec probe's answer).
func fakePython(t *testing.T, dir string, code int) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "python3")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit "+string(rune('0'+code))+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 31: with another python first on PATH (pyenv, conda), a torch job
// failed with "No module named 'torch'" and nothing else. The hint names
// the interpreter that ran and one that has torch.
func TestPythonHintsNameTheInterpreter(t *testing.T) {
	root := t.TempDir()
	shim := fakePython(t, filepath.Join(root, "shims"), 1)
	other := fakePython(t, filepath.Join(root, "system"), 0)
	t.Setenv("PATH", filepath.Dir(shim)+string(os.PathListSeparator)+filepath.Dir(other))
	hint := PythonHints([]string{"python3", "train.py"})
	if got := hint("Traceback (most recent call last):"); got != "" {
		t.Errorf("a traceback's first line: hint %q", got)
	}
	got := hint("ModuleNotFoundError: No module named 'torch'")
	want := shim + " cannot import torch, but " + other + " can: run that one, or a venv over it (" + other + " -m venv --system-site-packages DIR)"
	if !strings.HasPrefix(got, want) {
		t.Errorf("no torch:\n got %q\nwant %q...", got, want)
	}
	if got := hint("ValueError: Invalid backend: 'ringtail'"); !strings.Contains(got, "torch in "+shim+` does not know the "ringtail" backend: install the ringtail-torch wheel`) ||
		!strings.Contains(got, "add `import ringtail_torch`") {
		t.Errorf("invalid backend: %q", got)
	}
	if got := hint("ModuleNotFoundError: No module named 'ringtail_torch'"); !strings.Contains(got, shim+" has no ringtail_torch: install the ringtail-torch wheel into it") {
		t.Errorf("no ringtail_torch: %q", got)
	}
	// Not a python command: the hint says "the rank's python".
	if got := PythonHints([]string{"./train.sh"})("No module named 'torch'"); !strings.Contains(got, "the rank's python cannot import torch") {
		t.Errorf("script: %q", got)
	}
}

// A hint is written once, after the rank's line, however many ranks print
// the line.
func TestOutputWritesEachHintOnce(t *testing.T) {
	var buf bytes.Buffer
	o := newOutput(&buf, &buf, true)
	o.hint = func(line string) string {
		if strings.Contains(line, "boom") {
			return "do X"
		}
		return ""
	}
	o.name = "ringtail run"
	for r := range 2 {
		lw := o.stream(r, true, nil)
		lw.Write([]byte("fine\nboom here\n"))
	}
	o.stream(0, false, nil).Write([]byte("boom on stdout\n"))
	want := "[0] fine\n[0] boom here\nringtail run: rank 0: do X\n[1] fine\n[1] boom here\n[0] boom on stdout\n"
	if buf.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", buf.String(), want)
	}
}
