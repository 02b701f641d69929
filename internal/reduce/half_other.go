//go:build !amd64

package reduce

// halfBulk is the element granularity of the 16-bit kernels (none here).
const halfBulk = 1

// halfVector says that no 16-bit vector kernel exists on this architecture.
var halfVector = halfKernels{}

// applyF16 folds s into d as float16 (the portable loop on this
// architecture).
func applyF16(d, s []uint16, op Op) { applyF16Portable(d, s, op) }

// applyBF16 folds s into d as bfloat16 (the portable loop here).
func applyBF16(d, s []uint16, op Op) { applyBF16Portable(d, s, op) }

// scaleF16 divides every float16 element of v by n (portable loop).
func scaleF16(v []uint16, n float32) { scaleF16Portable(v, n) }

// scaleBF16 divides every bfloat16 element of v by n (portable loop).
func scaleBF16(v []uint16, n float32) { scaleBF16Portable(v, n) }
