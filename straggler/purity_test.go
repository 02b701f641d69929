package straggler

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestDecisionCodeIsPure holds the package's non-test files to STYLE.md:
// only the imports below, no goroutines, no clock reads, no global random
// source. ringtail sim runs this code at 4096 ranks and must get the plans
// the ranks get. internal/cost, the one cost model, is held to the same
// rules by its own test.
func TestDecisionCodeIsPure(t *testing.T) {
	purity.Check(t, []string{"cmp", "encoding/json", "errors", "fmt", "math", "slices", "sort", "strconv", "strings", "time",
		"gonum.org/v1/gonum/blas", "gonum.org/v1/gonum/blas/blas64",
		"github.com/ringtail-ml/ringtail/topology", "github.com/ringtail-ml/ringtail/balance",
		"github.com/ringtail-ml/ringtail/internal/cost"}, 10)
}
