package gradcode

import "fmt"

// Float is the element type of gradients and payloads.
type Float interface {
	~float32 | ~float64
}

// encodeBlock is the number of elements accumulated in float64 at a time.
const encodeBlock = 256

// Encode computes worker's coded payload out = Σ_t B[worker][p_t]·partGrads[t]
// where p_t = p.Assignment[worker][t]: partGrads holds the gradients of the
// worker's partitions in Assignment order, all of len(out). Sums are
// accumulated in float64 and rounded once to the payload type, so a float32
// payload carries exactly the rounding the plan's Quality accounts for. It
// does not allocate. Errors wrap ErrBadRanks or ErrShape.
func Encode[G, P Float](p *Plan, worker int, partGrads [][]G, out []P) error {
	if worker < 0 || worker >= p.N {
		return fmt.Errorf("%w: worker %d out of range [0, %d)", ErrBadRanks, worker, p.N)
	}
	parts := p.Assignment[worker]
	if len(partGrads) != len(parts) {
		return fmt.Errorf("%w: %d partition gradients for worker %d, which holds %d", ErrShape, len(partGrads), worker, len(parts))
	}
	for t, g := range partGrads {
		if len(g) != len(out) {
			return fmt.Errorf("%w: gradient of partition %d has %d elements, payload %d", ErrShape, parts[t], len(g), len(out))
		}
	}
	row := p.B[worker]
	var acc [encodeBlock]float64
	for lo := 0; lo < len(out); lo += encodeBlock {
		hi := min(lo+encodeBlock, len(out))
		blk := acc[:hi-lo]
		clear(blk)
		for t, g := range partGrads {
			c := row[parts[t]]
			if c == 0 {
				continue
			}
			for e, x := range g[lo:hi] {
				blk[e] += c * float64(x)
			}
		}
		for e, x := range blk {
			out[lo+e] = P(x)
		}
	}
	return nil
}
