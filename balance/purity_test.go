package balance

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestSolversArePure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestSolversArePure(t *testing.T) {
	purity.Check(t, []string{"cmp", "container/heap", "errors", "fmt", "math", "math/bits", "math/rand/v2", "slices",
		"gonum.org/v1/gonum/floats"}, 10)
}
