package citest

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that records how a test ended instead of
// ending it.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }
func (r *recorder) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...) }

// A missing tool skips the test outside CI and fails it under CI=true.
func TestMissingFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	for _, ci := range []string{"", "false", "1", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{}
		Missing(r, "no frobnicator")
		if ci == "true" {
			if r.failed == "" || r.skipped != "" || !InCI() {
				t.Errorf("CI=%q: failed %q, skipped %q", ci, r.failed, r.skipped)
			}
			continue
		}
		if r.skipped != "no frobnicator" || r.failed != "" || InCI() {
			t.Errorf("CI=%q: failed %q, skipped %q", ci, r.failed, r.skipped)
		}
	}
}
