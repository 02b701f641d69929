package ring

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestBuildersArePure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestBuildersArePure(t *testing.T) {
	purity.Check(t, []string{"fmt", "slices", "github.com/ringtail-ml/ringtail/internal/plan"}, 2)
}
