package reduce

import "golang.org/x/sys/cpu"

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
