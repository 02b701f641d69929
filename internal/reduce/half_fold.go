package reduce

import "math"

// The 16-bit folds (float16 and bfloat16) share one contract, kept bit for
// bit by the portable loops below and by every vector kernel:
//
//   - both operands are widened exactly to float32 (F16ToF32, BF16ToF32),
//     a op b is computed there (Go's min and max for Min and Max: -0 < +0),
//     and the result is rounded once to 16 bits with round-to-nearest-even
//     (F32ToF16, F32ToBF16), so float16 overflows to ±Inf and underflows
//     through its subnormals to ±0;
//   - when the float32 result is a NaN, it is replaced before rounding by
//     the first NaN operand, a (the destination) before b (the source), or,
//     when neither operand is a NaN (∞−∞, 0·∞), by defaultNaN. The
//     narrowing then quiets it: float16 keeps only the sign (±0x7e00),
//     bfloat16 keeps the sign and payload and sets the quiet bit (0x0040),
//     so a signalling NaN comes out quiet.
//
// Hardware alone decides which NaN an addition returns in whatever operand
// order the compiler picked; stating the rule makes the result the same on
// every platform and in every kernel.

// halfKernels says which 16-bit vector kernels the CPU runs (the rest of
// the package falls back to the portable loops).
type halfKernels struct{ f16, bf16 bool }

// defaultNaNBits is the float32 NaN a fold of two non-NaN operands yields
// when the result is undefined: the quiet NaN with the sign bit set that x86
// produces (it rounds to 0xfe00 in float16 and 0xffc0 in bfloat16).
const defaultNaNBits = 0xffc00000

// nanRule returns r unless r is a NaN, in which case it returns the NaN the
// 16-bit contract prescribes for a op b.
func nanRule(r, a, b float32) float32 {
	if r == r {
		return r
	}
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	return math.Float32frombits(defaultNaNBits)
}

// fold32 computes a op b in float32 under the 16-bit NaN rule (Avg folds as
// Sum).
func fold32(a, b float32, op Op) float32 {
	var r float32
	switch op {
	case Prod:
		r = a * b
	case Min:
		r = min(a, b)
	case Max:
		r = max(a, b)
	default:
		r = a + b
	}
	return nanRule(r, a, b)
}

// applyF16Portable folds s into d as float16 with the portable scalar code
// (the reference every float16 kernel matches). The loops are spelled out
// per type, rather than taking the converters as function values, so the
// conversions inline.
func applyF16Portable(d, s []uint16, op Op) {
	s = s[:len(d)]
	switch op {
	case Sum, Avg:
		for i := range d {
			a, b := F16ToF32(d[i]), F16ToF32(s[i])
			d[i] = F32ToF16(nanRule(a+b, a, b))
		}
	default:
		for i := range d {
			d[i] = F32ToF16(fold32(F16ToF32(d[i]), F16ToF32(s[i]), op))
		}
	}
}

// applyBF16Portable is applyF16Portable for bfloat16.
func applyBF16Portable(d, s []uint16, op Op) {
	s = s[:len(d)]
	switch op {
	case Sum, Avg:
		for i := range d {
			a, b := BF16ToF32(d[i]), BF16ToF32(s[i])
			d[i] = F32ToBF16(nanRule(a+b, a, b))
		}
	default:
		for i := range d {
			d[i] = F32ToBF16(fold32(BF16ToF32(d[i]), BF16ToF32(s[i]), op))
		}
	}
}

// scaleF16Portable divides every float16 element of v by n in float32,
// rounding once (a NaN element stays that NaN, quieted).
func scaleF16Portable(v []uint16, n float32) {
	for i := range v {
		v[i] = F32ToF16(F16ToF32(v[i]) / n)
	}
}

// scaleBF16Portable is scaleF16Portable for bfloat16.
func scaleBF16Portable(v []uint16, n float32) {
	for i := range v {
		v[i] = F32ToBF16(BF16ToF32(v[i]) / n)
	}
}
