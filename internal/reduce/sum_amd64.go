package reduce

import (
	"math"

	"golang.org/x/sys/cpu"
)

// sumF32AVX2 adds s[i] to d[i] for i < n, eight lanes at a time; n must be
// a multiple of 32. IEEE addition is exact per element, so the result has
// the same bits as the portable loop.
//
//go:noescape
func sumF32AVX2(d, s *float32, n int)

// sumF64AVX2 is sumF32AVX2 for float64; n must be a multiple of 16.
//
//go:noescape
func sumF64AVX2(d, s *float64, n int)

// sumFloat32 is the float32 Sum kernel: AVX2 for the bulk where the CPU has
// it, the portable loop for the rest.
func sumFloat32(d, s []float32) {
	s = s[:len(d)]
	if bulk := len(d) &^ 31; bulk > 0 && cpu.X86.HasAVX2 {
		sumF32AVX2(&d[0], &s[0], bulk)
		d, s = d[bulk:], s[bulk:]
	}
	sum(d, s)
}

// sumFloat64 is sumFloat32 for float64.
func sumFloat64(d, s []float64) {
	s = s[:len(d)]
	if bulk := len(d) &^ 15; bulk > 0 && cpu.X86.HasAVX2 {
		sumF64AVX2(&d[0], &s[0], bulk)
		d, s = d[bulk:], s[bulk:]
	}
	sum(d, s)
}

// The other float kernels (sum_amd64.s): d = d op s for i < n, n a
// multiple of 32 (float32) or 16 (float64); scale divides d by div.
// Each has the bits of the portable loop (TestFloatKernelsMatchPortableLoop).

//go:noescape
func prodF32AVX2(d, s *float32, n int)

//go:noescape
func prodF64AVX2(d, s *float64, n int)

//go:noescape
func minF32AVX2(d, s *float32, n int)

//go:noescape
func minF64AVX2(d, s *float64, n int)

//go:noescape
func maxF32AVX2(d, s *float32, n int)

//go:noescape
func maxF64AVX2(d, s *float64, n int)

// scaleF32AVX2 divides n float32s (a multiple of 32) by x.
//
//go:noescape
func scaleF32AVX2(d *float32, n int, x float32)

// scaleF64AVX2 divides n float64s (a multiple of 16) by x.
//
//go:noescape
func scaleF64AVX2(d *float64, n int, x float64)

// mulF32AVX2 multiplies n float32s (a multiple of 32) by x.
//
//go:noescape
func mulF32AVX2(d *float32, n int, x float32)

// mulF64AVX2 multiplies n float64s (a multiple of 16) by x.
//
//go:noescape
func mulF64AVX2(d *float64, n int, x float64)

// foldFloat32 is the float32 kernel of Prod, Min and Max: AVX2 for the bulk
// where the CPU has it, the portable loop for the rest.
func foldFloat32(d, s []float32, op Op) {
	s = s[:len(d)]
	if bulk := len(d) &^ 31; bulk > 0 && cpu.X86.HasAVX2 {
		switch op {
		case Prod:
			prodF32AVX2(&d[0], &s[0], bulk)
		case Min:
			minF32AVX2(&d[0], &s[0], bulk)
		case Max:
			maxF32AVX2(&d[0], &s[0], bulk)
		default:
			bulk = 0
		}
		d, s = d[bulk:], s[bulk:]
	}
	apply(d, s, op)
}

// foldFloat64 is foldFloat32 for float64.
func foldFloat64(d, s []float64, op Op) {
	s = s[:len(d)]
	if bulk := len(d) &^ 15; bulk > 0 && cpu.X86.HasAVX2 {
		switch op {
		case Prod:
			prodF64AVX2(&d[0], &s[0], bulk)
		case Min:
			minF64AVX2(&d[0], &s[0], bulk)
		case Max:
			maxF64AVX2(&d[0], &s[0], bulk)
		default:
			bulk = 0
		}
		d, s = d[bulk:], s[bulk:]
	}
	apply(d, s, op)
}

// scaleFloat32 divides every element by n (Avg): AVX2 for the bulk. A
// power-of-two n (a world of 2, 4, 8 ... ranks) multiplies by 1/n instead:
// 1/n is exact, so the product and the quotient are the same real number,
// rounded the same way — bit for bit the division (NaNs, infinities and
// subnormal results included) at the multiplier's rate instead of the
// divider's (float32, 64 KiB in cache: 94–112 against 32–38 GB/s).
func scaleFloat32(v []float32, n float32) {
	if bulk := len(v) &^ 31; bulk > 0 && cpu.X86.HasAVX2 {
		if powerOfTwo(float64(n)) {
			mulF32AVX2(&v[0], bulk, 1/n)
		} else {
			scaleF32AVX2(&v[0], bulk, n)
		}
		v = v[bulk:]
	}
	scale(v, n)
}

// scaleFloat64 is scaleFloat32 for float64.
func scaleFloat64(v []float64, n float64) {
	if bulk := len(v) &^ 15; bulk > 0 && cpu.X86.HasAVX2 {
		if powerOfTwo(n) {
			mulF64AVX2(&v[0], bulk, 1/n)
		} else {
			scaleF64AVX2(&v[0], bulk, n)
		}
		v = v[bulk:]
	}
	scale(v, n)
}

// powerOfTwo reports whether n is 2^k for some k ≥ 0 (a positive
// mantissa of exactly 1).
func powerOfTwo(n float64) bool {
	frac, _ := math.Frexp(n)
	return frac == 0.5
}
