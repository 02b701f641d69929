package shard

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestQueueIsPure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestQueueIsPure(t *testing.T) {
	purity.Check(t, []string{"errors", "fmt", "math/bits", "math/rand/v2", "slices", "unicode", "unicode/utf8"}, 6)
}
