package straggler

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestDecisionCodeIsPure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestDecisionCodeIsPure(t *testing.T) {
	purity.Check(t, []string{"cmp", "encoding/json", "errors", "fmt", "math", "slices", "sort", "strconv", "strings", "time",
		"gonum.org/v1/gonum/blas", "gonum.org/v1/gonum/blas/blas64"}, 10)
}
