package view

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/purity"
)

// TestDeciderIsPure holds the package's non-test files to STYLE.md: only the
// imports below, no goroutines, no clock reads, no global random source.
func TestDeciderIsPure(t *testing.T) {
	purity.Check(t, []string{"crypto/sha256", "encoding/binary", "errors", "fmt", "maps", "slices", "strings", "time"}, 3)
}
