package reduce

import "golang.org/x/sys/cpu"

// The 16-bit vector kernels in half_amd64.s. Each folds n elements of s
// into d (n a multiple of 32) under the contract in half_fold.go, with the
// same bits as the portable loop.
//
//go:noescape
func f16SumAVX2(d, s *uint16, n int)

//go:noescape
func f16ProdAVX2(d, s *uint16, n int)

//go:noescape
func f16MinAVX2(d, s *uint16, n int)

//go:noescape
func f16MaxAVX2(d, s *uint16, n int)

//go:noescape
func bf16SumAVX2(d, s *uint16, n int)

//go:noescape
func bf16ProdAVX2(d, s *uint16, n int)

//go:noescape
func bf16MinAVX2(d, s *uint16, n int)

//go:noescape
func bf16MaxAVX2(d, s *uint16, n int)

// f16ScaleAVX2 and bf16ScaleAVX2 divide n elements of v by by (n a
// multiple of 32).
//
//go:noescape
func f16ScaleAVX2(v *uint16, n int, by float32)

//go:noescape
func bf16ScaleAVX2(v *uint16, n int, by float32)

// cpuHasF16C reports CPUID's F16C bit (half-precision conversions), which
// golang.org/x/sys/cpu does not expose.
func cpuHasF16C() bool

// halfVector records which 16-bit vector kernels this CPU runs. It is set
// once at package initialisation from the CPU's feature bits and never
// written again (like cpu.X86 itself).
var halfVector = halfKernels{
	bf16: cpu.X86.HasAVX2,
	f16:  cpu.X86.HasAVX2 && cpuHasF16C(),
}

// halfBulk is the element granularity of the 16-bit kernels.
const halfBulk = 32

// applyF16 folds s into d as float16: the F16C/AVX2 kernel for the bulk
// where the CPU has it, the portable loop for the rest.
func applyF16(d, s []uint16, op Op) {
	s = s[:len(d)]
	if bulk := len(d) &^ (halfBulk - 1); bulk > 0 && halfVector.f16 {
		switch op {
		case Sum, Avg:
			f16SumAVX2(&d[0], &s[0], bulk)
		case Prod:
			f16ProdAVX2(&d[0], &s[0], bulk)
		case Min:
			f16MinAVX2(&d[0], &s[0], bulk)
		case Max:
			f16MaxAVX2(&d[0], &s[0], bulk)
		}
		d, s = d[bulk:], s[bulk:]
	}
	applyF16Portable(d, s, op)
}

// applyBF16 is applyF16 for bfloat16 (AVX2 only: bfloat16 widens by a shift).
func applyBF16(d, s []uint16, op Op) {
	s = s[:len(d)]
	if bulk := len(d) &^ (halfBulk - 1); bulk > 0 && halfVector.bf16 {
		switch op {
		case Sum, Avg:
			bf16SumAVX2(&d[0], &s[0], bulk)
		case Prod:
			bf16ProdAVX2(&d[0], &s[0], bulk)
		case Min:
			bf16MinAVX2(&d[0], &s[0], bulk)
		case Max:
			bf16MaxAVX2(&d[0], &s[0], bulk)
		}
		d, s = d[bulk:], s[bulk:]
	}
	applyBF16Portable(d, s, op)
}

// scaleF16 divides every float16 element of v by n (the Avg finalisation).
func scaleF16(v []uint16, n float32) {
	if bulk := len(v) &^ (halfBulk - 1); bulk > 0 && halfVector.f16 {
		f16ScaleAVX2(&v[0], bulk, n)
		v = v[bulk:]
	}
	scaleF16Portable(v, n)
}

// scaleBF16 is scaleF16 for bfloat16.
func scaleBF16(v []uint16, n float32) {
	if bulk := len(v) &^ (halfBulk - 1); bulk > 0 && halfVector.bf16 {
		bf16ScaleAVX2(&v[0], bulk, n)
		v = v[bulk:]
	}
	scaleBF16Portable(v, n)
}
