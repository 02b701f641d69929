package topology

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestTopologyIsPure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestTopologyIsPure(t *testing.T) {
	purity.Check(t, []string{"cmp", "errors", "fmt", "math", "math/bits", "slices", "time"}, 8)
}
