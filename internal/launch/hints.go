package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// pythonName matches the names of Python interpreters: python, python3,
// python3.11.
var pythonName = regexp.MustCompile(`^python[0-9.]*$`)

// PythonHints returns a Config.Hint for a job running command: when a
// rank's Python cannot import torch or ringtail_torch, or torch does not
// know the "ringtail" backend, one line says which interpreter ran and
// what to do, instead of the traceback alone:
//
//	/root/.pyenv/shims/python3 cannot import torch, but /usr/bin/python3 can: run that one, or a venv over it (/usr/bin/python3 -m venv --system-site-packages DIR); see docs/pytorch.md, "Install and run"
//
// The interpreters that can import torch are looked for (without importing
// it) only when a rank could not.
func PythonHints(command []string) func(line string) string {
	py := "the rank's python"
	if len(command) > 0 && pythonName.MatchString(filepath.Base(command[0])) {
		py = command[0]
		if p, err := exec.LookPath(command[0]); err == nil {
			py = p
		}
	}
	var once sync.Once
	var withTorch string
	return func(line string) string {
		switch {
		case strings.Contains(line, "No module named 'torch'"):
			once.Do(func() { withTorch = pythonWith("torch", py) })
			if withTorch == "" {
				return fmt.Sprintf("%s cannot import torch: run the python that has it (Debian: apt-get install python3-torch for /usr/bin/python3), or a venv over it; see docs/pytorch.md, \"Install and run\"", py)
			}
			return fmt.Sprintf("%s cannot import torch, but %s can: run that one, or a venv over it (%s -m venv --system-site-packages DIR); see docs/pytorch.md, \"Install and run\"", py, withTorch, withTorch)
		case strings.Contains(line, "No module named 'ringtail_torch'"):
			return fmt.Sprintf("%s has no ringtail_torch: install the ringtail-torch wheel into it, or into a venv over it (make wheel; see docs/pytorch.md, \"Install and run\")", py)
		case strings.Contains(line, "Invalid backend: 'ringtail'"):
			return fmt.Sprintf("torch in %s does not know the \"ringtail\" backend: install the ringtail-torch wheel into it (the backend then registers itself), or add `import ringtail_torch` before init_process_group; see docs/pytorch.md", py)
		}
		return ""
	}
}

// pythonWith returns the first Python 3 on PATH, or /usr/bin/python3 or
// /usr/local/bin/python3, other than not, that can import module (found
// with importlib.util.find_spec: nothing is imported), or "".
func pythonWith(module, not string) string {
	var candidates []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		candidates = append(candidates, filepath.Join(dir, "python3"))
	}
	candidates = append(candidates, "/usr/bin/python3", "/usr/local/bin/python3")
	seen := map[string]bool{not: true}
	if p, err := filepath.EvalSymlinks(not); err == nil {
		seen[p] = true
	}
	for _, c := range candidates {
		real, err := filepath.EvalSymlinks(c)
		if err != nil || seen[c] || seen[real] {
			continue
		}
		seen[c], seen[real] = true, true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = exec.CommandContext(ctx, c, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('"+module+"') is None)").Run()
		cancel()
		if err == nil {
			return c
		}
	}
	return ""
}
