package elastic

import (
	"os"
	"testing"
)

// TestMain lets the process tests re-execute this binary as a rank (the
// bench rank, or the test-only roles in process_test.go).
func TestMain(m *testing.M) {
	if code, ok := RankMain(); ok {
		os.Exit(code)
	}
	if code, ok := testRoleMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
