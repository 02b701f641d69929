package elastic_test

import (
	"os"
	"testing"

	"github.com/ringtail-ml/ringtail/bench/recovery"
)

// TestMain lets the process tests re-execute this binary as a rank (the
// bench rank of bench/recovery, or the test-only roles in process_test.go).
// It is in the external test package, as they are, since bench/recovery
// imports elastic.
func TestMain(m *testing.M) {
	if code, ok := recovery.RankMain(); ok {
		os.Exit(code)
	}
	if code, ok := testRoleMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
