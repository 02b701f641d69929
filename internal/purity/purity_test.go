package purity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder captures failures so the checker itself can be tested.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) { r.errs = append(r.errs, format) }
func (r *recorder) Fatalf(format string, args ...any) { r.errs = append(r.errs, format) }
func (r *recorder) Helper()                           {}

func TestCheckCatchesEveryViolation(t *testing.T) {
	dir := t.TempDir()
	src := `package p
import (
	"math/rand/v2"
	"net"
	"time"
)
func f() {
	go func() {}()
	_ = time.Now()
	_ = rand.IntN(3)
	_ = rand.New(rand.NewPCG(1, 2))
	_ = net.IPv4len
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	Check(r, []string{"math/rand/v2", "time"}, 1)
	got := strings.Join(r.errs, "\n")
	for _, want := range []string{"imports", "goroutine", "clock read", "global random source"} {
		if !strings.Contains(got, want) {
			t.Errorf("missed a %q violation; reported:\n%s", want, got)
		}
	}
	if len(r.errs) != 4 {
		t.Errorf("%d violations reported, want 4 (rand.New and rand.NewPCG are allowed):\n%s", len(r.errs), got)
	}
}
