#include "textflag.h"

// The 16-bit fold kernels (see half_fold.go for the contract they keep and
// half_amd64.go for the dispatch). Each computes in float32 eight lanes per
// Y register, 32 elements (a cache line of each buffer) per iteration; n
// is a multiple of 32. Go's assembler lists operands in reverse Intel
// order: VADDPS b, a, r is r = a + b with a as the first source, whose NaN
// x86 returns first.

// BCAST fills every 32-bit lane of Y with the constant c (clobbers AX).
#define BCAST(c, X, Y) \
	MOVL         $c, AX \
	VMOVD        AX, X \
	VPBROADCASTD X, Y

// The operators: r = a op b in float32, t is scratch, a and b are kept.
// x86 already returns the first NaN operand, a before b, for addition and
// multiplication and the default NaN (0xffc00000) for ∞−∞ and 0·∞.
#define OPSUM(a, b, r, t) VADDPS b, a, r
#define OPPROD(a, b, r, t) VMULPS b, a, r

// OPMIN: VMINPS returns b when a < b is false, which covers a == b except
// for ±0, where the OR of the two gives -0 as Go's min does; a NaN a is
// then put back (VMINPS returns b for it).
#define OPMIN(a, b, r, t) \
	VMINPS    b, a, r \
	VCMPPS    $0, b, a, t \
	VANDPS    a, t, t \
	VORPS     t, r, r \
	VCMPPS    $3, a, a, t \
	VBLENDVPS t, a, r, r

// OPMAX: as OPMIN, except that equal operands are ANDed (max(-0, +0) is
// +0): r &= (a != b) | a.
#define OPMAX(a, b, r, t) \
	VMAXPS    b, a, r \
	VCMPPS    $4, b, a, t \
	VORPS     a, t, t \
	VANDPS    t, r, r \
	VCMPPS    $3, a, a, t \
	VBLENDVPS t, a, r, r

// F16NAN makes every float16 NaN in the 16 lanes of h sign|0x7e00, as
// F32ToF16 does (VCVTPS2PH keeps nine payload bits and sets the quiet bit):
// h &^= (h&0x7fff > 0x7c00) & 0x01ff. Constants: Y15 = 0x7fff, Y14 =
// 0x7c00, Y13 = 0x01ff in every word. t scratch.
#define F16NAN(h, t) \
	VPAND    Y15, h, t \
	VPCMPGTW Y14, t, t \
	VPAND    Y13, t, t \
	VPANDN   h, t, h

// BCASTW fills every 16-bit lane of Y with the constant c (clobbers AX).
#define BCASTW(c, X, Y) \
	MOVL         $c, AX \
	VMOVD        AX, X \
	VPBROADCASTW X, Y

#define F16CONSTS \
	BCASTW(0x7fff, X15, Y15) \
	BCASTW(0x7c00, X14, Y14) \
	BCASTW(0x01ff, X13, Y13)

// F16BLOCK folds the 16 float16 elements at byte offset off of s (SI) into
// d (DI). VCVTPS2PH's immediate 0 is round-to-nearest-even.
#define F16BLOCK(OP, off) \
	VCVTPH2PS   off(DI), Y0 \
	VCVTPH2PS   off+16(DI), Y1 \
	VCVTPH2PS   off(SI), Y2 \
	VCVTPH2PS   off+16(SI), Y3 \
	OP(Y0, Y2, Y4, Y6) \
	OP(Y1, Y3, Y5, Y7) \
	VCVTPS2PH   $0, Y4, X4 \
	VCVTPS2PH   $0, Y5, X5 \
	VINSERTI128 $1, X5, Y4, Y4 \
	F16NAN(Y4, Y6) \
	VMOVDQU     Y4, off(DI)

// AHEAD asks for the cache line of d (DI) and of s (SI) that the loop
// reaches six iterations later. The 16-bit folds compute for about as
// long as they wait for memory, and the hardware prefetcher alone does not
// overlap the two: out of cache (64 MiB buffers, BenchmarkHalfFold) every
// op gains 1.2–1.35×, float16 Sum 8.6 → 11.6 GB/s (float32's kernel,
// already at memory speed, showed no clear gain; the one-buffer Scale
// loops none). In cache it changes nothing; a prefetch past the end of a
// buffer is harmless (it never faults).
#define AHEAD \
	PREFETCHT0 384(DI) \
	PREFETCHT0 384(SI)

// F16LOOP folds 32 float16 elements (one cache line of each buffer) per
// iteration, CX iterations.
#define F16LOOP(OP) \
	F16CONSTS \
loop: \
	AHEAD \
	F16BLOCK(OP, 0) \
	F16BLOCK(OP, 32) \
	ADDQ $64, DI \
	ADDQ $64, SI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
	RET

// BF16ROUND rounds the float32 lanes of r to bfloat16 in their upper 16
// bits as F32ToBF16 does: r + 0x7fff + (bit 16 of r). A NaN needs no case
// of its own as long as it is quiet: a NaN here came from a widened
// bfloat16, so its low 16 bits are zero and the addition cannot carry into
// the upper half. Constants: Y14 = 1, Y13 = 0x7fff. u scratch.
#define BF16ROUND(r, u) \
	VPSRLD $16, r, u \
	VPAND  Y14, u, u \
	VPADDD Y13, u, u \
	VPADDD u, r, r

// BF16QUIET sets the quiet bit (Y12 = 0x00400000) of every NaN lane of r.
// Addition, multiplication and division return quiet NaNs already; min and
// max can return a signalling operand unchanged. t scratch.
#define BF16QUIET(r, t) \
	VCMPPS $3, r, r, t \
	VANDPS Y12, t, t \
	VORPS  t, r, r

// BF16MIN and BF16MAX are OPMIN and OPMAX with the NaN quieted.
#define BF16MIN(a, b, r, t) \
	OPMIN(a, b, r, t) \
	BF16QUIET(r, t)

#define BF16MAX(a, b, r, t) \
	OPMAX(a, b, r, t) \
	BF16QUIET(r, t)

#define BF16CONSTS \
	BCAST(0xffff0000, X15, Y15) \
	BCAST(0x00000001, X14, Y14) \
	BCAST(0x00007fff, X13, Y13) \
	BCAST(0x00400000, X12, Y12)

// BF16BLOCK folds the 16 bfloat16 elements at byte offset off of s (SI)
// into d (DI). Widening is a shift: the even elements (low halves of each
// 32-bit lane) are shifted up, the odd ones masked in place; the two
// results are joined with a word blend, so nothing crosses a lane.
#define BF16BLOCK(OP, off) \
	VMOVDQU  off(DI), Y0 \
	VMOVDQU  off(SI), Y1 \
	VPSLLD   $16, Y0, Y2 \
	VPAND    Y15, Y0, Y0 \
	VPSLLD   $16, Y1, Y3 \
	VPAND    Y15, Y1, Y1 \
	OP(Y2, Y3, Y4, Y6) \
	OP(Y0, Y1, Y5, Y7) \
	BF16ROUND(Y4, Y6) \
	BF16ROUND(Y5, Y7) \
	VPSRLD   $16, Y4, Y4 \
	VPBLENDW $0xaa, Y5, Y4, Y4 \
	VMOVDQU  Y4, off(DI)

// BF16LOOP folds 32 bfloat16 elements per iteration, CX iterations.
#define BF16LOOP(OP) \
	BF16CONSTS \
loop: \
	AHEAD \
	BF16BLOCK(OP, 0) \
	BF16BLOCK(OP, 32) \
	ADDQ $64, DI \
	ADDQ $64, SI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
	RET

#define ARGS \
	MOVQ d+0(FP), DI \
	MOVQ s+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $5, CX

// func f16SumAVX2(d, s *uint16, n int)
TEXT ·f16SumAVX2(SB), NOSPLIT, $0-24
	ARGS
	F16LOOP(OPSUM)

// func f16ProdAVX2(d, s *uint16, n int)
TEXT ·f16ProdAVX2(SB), NOSPLIT, $0-24
	ARGS
	F16LOOP(OPPROD)

// func f16MinAVX2(d, s *uint16, n int)
TEXT ·f16MinAVX2(SB), NOSPLIT, $0-24
	ARGS
	F16LOOP(OPMIN)

// func f16MaxAVX2(d, s *uint16, n int)
TEXT ·f16MaxAVX2(SB), NOSPLIT, $0-24
	ARGS
	F16LOOP(OPMAX)

// func bf16SumAVX2(d, s *uint16, n int)
TEXT ·bf16SumAVX2(SB), NOSPLIT, $0-24
	ARGS
	BF16LOOP(OPSUM)

// func bf16ProdAVX2(d, s *uint16, n int)
TEXT ·bf16ProdAVX2(SB), NOSPLIT, $0-24
	ARGS
	BF16LOOP(OPPROD)

// func bf16MinAVX2(d, s *uint16, n int)
TEXT ·bf16MinAVX2(SB), NOSPLIT, $0-24
	ARGS
	BF16LOOP(BF16MIN)

// func bf16MaxAVX2(d, s *uint16, n int)
TEXT ·bf16MaxAVX2(SB), NOSPLIT, $0-24
	ARGS
	BF16LOOP(BF16MAX)

// F16SCALE divides the 16 float16 elements at byte offset off of v (DI) by
// Y12.
#define F16SCALE(off) \
	VCVTPH2PS   off(DI), Y0 \
	VCVTPH2PS   off+16(DI), Y1 \
	VDIVPS      Y12, Y0, Y4 \
	VDIVPS      Y12, Y1, Y5 \
	VCVTPS2PH   $0, Y4, X4 \
	VCVTPS2PH   $0, Y5, X5 \
	VINSERTI128 $1, X5, Y4, Y4 \
	F16NAN(Y4, Y6) \
	VMOVDQU     Y4, off(DI)

// BF16SCALE divides the 16 bfloat16 elements at byte offset off of v (DI)
// by Y11.
#define BF16SCALE(off) \
	VMOVDQU  off(DI), Y0 \
	VPSLLD   $16, Y0, Y2 \
	VPAND    Y15, Y0, Y0 \
	VDIVPS   Y11, Y2, Y4 \
	VDIVPS   Y11, Y0, Y5 \
	BF16ROUND(Y4, Y6) \
	BF16ROUND(Y5, Y7) \
	VPSRLD   $16, Y4, Y4 \
	VPBLENDW $0xaa, Y5, Y4, Y4 \
	VMOVDQU  Y4, off(DI)

// func f16ScaleAVX2(v *uint16, n int, by float32)
// v[i] = v[i] / by in float32, rounded once; n is a multiple of 32.
TEXT ·f16ScaleAVX2(SB), NOSPLIT, $0-20
	MOVQ         v+0(FP), DI
	MOVQ         n+8(FP), CX
	SHRQ         $5, CX
	VBROADCASTSS by+16(FP), Y12
	F16CONSTS

f16scale:
	F16SCALE(0)
	F16SCALE(32)
	ADDQ        $64, DI
	DECQ        CX
	JNZ         f16scale
	VZEROUPPER
	RET

// func bf16ScaleAVX2(v *uint16, n int, by float32)
// As f16ScaleAVX2 for bfloat16.
TEXT ·bf16ScaleAVX2(SB), NOSPLIT, $0-20
	MOVQ         v+0(FP), DI
	MOVQ         n+8(FP), CX
	SHRQ         $5, CX
	VBROADCASTSS by+16(FP), Y11
	BF16CONSTS

bf16scale:
	BF16SCALE(0)
	BF16SCALE(32)
	ADDQ       $64, DI
	DECQ       CX
	JNZ        bf16scale
	VZEROUPPER
	RET

// func cpuHasF16C() bool
// CPUID leaf 1, ECX bit 29 (x/sys/cpu does not report F16C).
TEXT ·cpuHasF16C(SB), NOSPLIT, $0-1
	MOVL $1, AX
	XORL CX, CX
	CPUID
	SHRL $29, CX
	ANDL $1, CX
	MOVB CX, ret+0(FP)
	RET
