package faults

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Binaries are the programs a run needs.
type Binaries struct {
	Ringtail string // cmd/ringtail
	Worker   string // integration/faults/worker
}

// Build compiles cmd/ringtail and the worker into dir with the go tool,
// from the module rooted at root.
func Build(root, dir string) (Binaries, error) {
	b := Binaries{Ringtail: filepath.Join(dir, "ringtail"), Worker: filepath.Join(dir, "faultworker")}
	for pkg, out := range map[string]string{"./cmd/ringtail": b.Ringtail, "./integration/faults/worker": b.Worker} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("faults: go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}
