package algo

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestChoiceIsPure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestChoiceIsPure(t *testing.T) {
	purity.Check(t, []string{"cmp", "errors", "fmt", "math/bits", "slices", "strings", "time",
		"github.com/ringtail-ml/ringtail/internal/cost", "github.com/ringtail-ml/ringtail/internal/plan", "github.com/ringtail-ml/ringtail/internal/wire",
		"github.com/ringtail-ml/ringtail/ring", "github.com/ringtail-ml/ringtail/tree"}, 4)
}
