package gradcode

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestCodingIsPure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestCodingIsPure(t *testing.T) {
	purity.Check(t, []string{"errors", "fmt", "gonum.org/v1/gonum/blas", "gonum.org/v1/gonum/blas/blas64", "gonum.org/v1/gonum/lapack/lapack64",
		"gonum.org/v1/gonum/mat", "math", "math/rand", "slices", "sort"}, 13)
}
