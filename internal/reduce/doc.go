// Package reduce owns ringtail's element types, reduction operators and the
// reduction kernels that fold one buffer into another.
//
// Buffers are byte slices interpreted as little-endian elements of a DType
// (the host's native layout on every supported platform). Kernels are
// allocation-free and never touch the network; 16-bit floating types are
// stored in 16 bits and each pairwise reduction is computed in float32 and
// rounded once (round-to-nearest-even) back to 16 bits, with one stated NaN
// rule (half_fold.go) that the AVX2/F16C kernels and the portable loops
// keep bit for bit.
//
// This package must never import net, the transport or any ringtail package:
// it sits at the bottom of the dependency graph.
package reduce
