package driver

import (
	"fmt"
	"math"

	"github.com/ringtail-ml/ringtail/straggler"
)

// stateHeader is the number of float32 words before a state message's
// data. The header is integers, not numbers: the version is a uint64 whose
// low and high 32 bits travel as the bit patterns of words 0 and 1, the
// flags a uint32 in word 2 (math.Float32frombits). Nothing adds or
// converts these words on the way (a state is posted, never reduced), so
// every version is exact — a float32 value would be exact only up to 2²⁴
// steps.
const stateHeader = 3

// putStateHeader writes version and flags into b's first stateHeader words.
func putStateHeader(b []float32, version int, flags straggler.StateFlags) {
	v := uint64(version)
	b[0] = math.Float32frombits(uint32(v))
	b[1] = math.Float32frombits(uint32(v >> 32))
	b[2] = math.Float32frombits(uint32(flags))
}

// readStateHeader decodes the version and flags putStateHeader wrote.
func readStateHeader(b []float32) (int, straggler.StateFlags, error) {
	if len(b) < stateHeader {
		return 0, 0, fmt.Errorf("state message of %d elements, shorter than its %d-word header", len(b), stateHeader)
	}
	v := uint64(math.Float32bits(b[0])) | uint64(math.Float32bits(b[1]))<<32
	if v > math.MaxInt64 {
		return 0, 0, fmt.Errorf("state message of version %d, out of range", v)
	}
	return int(v), straggler.StateFlags(math.Float32bits(b[2])), nil
}
