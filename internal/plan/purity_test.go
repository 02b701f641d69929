package plan

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestPlansArePure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestPlansArePure(t *testing.T) {
	purity.Check(t, []string{"fmt", "math", "strings"}, 3)
}
