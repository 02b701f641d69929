// Package citest decides what a test does when a tool it needs is
// missing from the machine: skip with the reason, or, under CI (CI=true,
// which .ci/run sets), fail. .ci/run installs every tool the tests use, so
// there a missing one is a broken install step that must not pass unseen
// as a skip. It is for _test.go files.
package citest

import (
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t because of why (a missing tool), or fails it under CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: .ci/run installs it, so its absence fails the test)", why)
		return
	}
	t.Skip(why)
}
