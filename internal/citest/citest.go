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
