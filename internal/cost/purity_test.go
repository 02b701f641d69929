package cost

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestModelIsPure holds the package to STYLE.md: only the imports below,
// no goroutines, no clock reads, no global random source.
func TestModelIsPure(t *testing.T) {
	purity.Check(t, []string{"math", "time"}, 3)
}
