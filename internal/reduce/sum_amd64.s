#include "textflag.h"

// SUM128 adds 128 bytes of s (SI) to d (DI) per iteration, CX iterations,
// with the packed add ADD (VADDPS or VADDPD). Unaligned loads and stores.
#define SUM128(ADD) \
	JZ   done \
loop: \
	VMOVUPS 0(DI), Y0 \
	VMOVUPS 32(DI), Y1 \
	VMOVUPS 64(DI), Y2 \
	VMOVUPS 96(DI), Y3 \
	ADD     0(SI), Y0, Y0 \
	ADD     32(SI), Y1, Y1 \
	ADD     64(SI), Y2, Y2 \
	ADD     96(SI), Y3, Y3 \
	VMOVUPS Y0, 0(DI) \
	VMOVUPS Y1, 32(DI) \
	VMOVUPS Y2, 64(DI) \
	VMOVUPS Y3, 96(DI) \
	ADDQ    $128, DI \
	ADDQ    $128, SI \
	DECQ    CX \
	JNZ     loop \
	VZEROUPPER \
done: \
	RET

// BY32 and BY64 apply OP (a division or a multiplication) by the argument
// x to every lane of n float32s (a multiple of 32) or float64s (of 16).
#define BY32(OP) \
	MOVQ         d+0(FP), DI \
	MOVQ         n+8(FP), CX \
	VBROADCASTSS x+16(FP), Y15 \
	SHRQ         $5, CX \
	DIV128(OP)

#define BY64(OP) \
	MOVQ         d+0(FP), DI \
	MOVQ         n+8(FP), CX \
	VBROADCASTSD x+16(FP), Y15 \
	SHRQ         $4, CX \
	DIV128(OP)

// func sumF32AVX2(d, s *float32, n int)
// d[i] += s[i] for i < n; n is a multiple of 32.
TEXT ·sumF32AVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	SUM128(VADDPS)

// func sumF64AVX2(d, s *float64, n int)
// d[i] += s[i] for i < n; n is a multiple of 16.
TEXT ·sumF64AVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	SUM128(VADDPD)

// The other float kernels. Each is bit for bit what the portable Go loop
// computes on amd64 (kernel_test.go checks it), because each does what the
// Go compiler emits for one element, on eight or four lanes:
//   d*s        VMULPS / VMULPD (IEEE, exact per element like MULSS)
//   d/n        VDIVPS / VDIVPD (like DIVSS)
//   min(d, s)  m = MIN(d, s); (MIN(m, d)) | m: Go's lowering of min for
//              floats (MINSS/MINSD twice and an OR), which picks its NaN
//              and its zero sign the way the language defines
//   max(d, s)  -min(-d, -s): Go's lowering of max
// where MIN(a, b) is the x86 a < b ? a : b.

// MIN4 computes min(Y0..Y3, Y4..Y7) into Y0..Y3 (Y8..Y11 scratch; Y4..Y7
// clobbered) with MIN (VMINPS or VMINPD) and OR (VORPS or VORPD). Go's
// assembler lists operands in reverse Intel order: MIN b, a, r is r =
// a < b ? a : b.
#define MIN4(MIN, OR) \
	MIN Y4, Y0, Y8 \
	MIN Y5, Y1, Y9 \
	MIN Y6, Y2, Y10 \
	MIN Y7, Y3, Y11 \
	MIN Y0, Y8, Y4 \
	MIN Y1, Y9, Y5 \
	MIN Y2, Y10, Y6 \
	MIN Y3, Y11, Y7 \
	OR  Y8, Y4, Y0 \
	OR  Y9, Y5, Y1 \
	OR  Y10, Y6, Y2 \
	OR  Y11, Y7, Y3

#define LOAD8 \
	VMOVUPS 0(DI), Y0 \
	VMOVUPS 32(DI), Y1 \
	VMOVUPS 64(DI), Y2 \
	VMOVUPS 96(DI), Y3 \
	VMOVUPS 0(SI), Y4 \
	VMOVUPS 32(SI), Y5 \
	VMOVUPS 64(SI), Y6 \
	VMOVUPS 96(SI), Y7

#define STORE4 \
	VMOVUPS Y0, 0(DI) \
	VMOVUPS Y1, 32(DI) \
	VMOVUPS Y2, 64(DI) \
	VMOVUPS Y3, 96(DI)

// NEG4 flips the sign bit (Y15) of Y0..Y3 and, with NEG4S, of Y4..Y7.
#define NEG4(XOR) \
	XOR Y15, Y0, Y0 \
	XOR Y15, Y1, Y1 \
	XOR Y15, Y2, Y2 \
	XOR Y15, Y3, Y3

#define NEG4S(XOR) \
	XOR Y15, Y4, Y4 \
	XOR Y15, Y5, Y5 \
	XOR Y15, Y6, Y6 \
	XOR Y15, Y7, Y7

// MINLOOP and MAXLOOP fold 128 bytes per iteration, CX iterations.
#define MINLOOP(MIN, OR) \
	JZ   done \
loop: \
	LOAD8 \
	MIN4(MIN, OR) \
	STORE4 \
	ADDQ $128, DI \
	ADDQ $128, SI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

#define MAXLOOP(MIN, OR, XOR) \
	JZ   done \
loop: \
	LOAD8 \
	NEG4(XOR) \
	NEG4S(XOR) \
	MIN4(MIN, OR) \
	NEG4(XOR) \
	STORE4 \
	ADDQ $128, DI \
	ADDQ $128, SI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

#define ARGS32 \
	MOVQ d+0(FP), DI \
	MOVQ s+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $5, CX

#define ARGS64 \
	MOVQ d+0(FP), DI \
	MOVQ s+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $4, CX

// func prodF32AVX2(d, s *float32, n int); n is a multiple of 32.
TEXT ·prodF32AVX2(SB), NOSPLIT, $0-24
	ARGS32
	SUM128(VMULPS)

// func prodF64AVX2(d, s *float64, n int); n is a multiple of 16.
TEXT ·prodF64AVX2(SB), NOSPLIT, $0-24
	ARGS64
	SUM128(VMULPD)

// func minF32AVX2(d, s *float32, n int); n is a multiple of 32.
TEXT ·minF32AVX2(SB), NOSPLIT, $0-24
	ARGS32
	MINLOOP(VMINPS, VORPS)

// func minF64AVX2(d, s *float64, n int); n is a multiple of 16.
TEXT ·minF64AVX2(SB), NOSPLIT, $0-24
	ARGS64
	MINLOOP(VMINPD, VORPD)

// func maxF32AVX2(d, s *float32, n int); n is a multiple of 32.
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-24
	MOVL         $0x80000000, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	ARGS32
	MAXLOOP(VMINPS, VORPS, VXORPS)

// func maxF64AVX2(d, s *float64, n int); n is a multiple of 16.
TEXT ·maxF64AVX2(SB), NOSPLIT, $0-24
	MOVQ         $0x8000000000000000, AX
	VMOVQ        AX, X15
	VPBROADCASTQ X15, Y15
	ARGS64
	MAXLOOP(VMINPD, VORPD, VXORPD)

// DIV128 divides 128 bytes at DI by every lane of Y15 per iteration, CX
// iterations.
#define DIV128(DIV) \
	JZ   done \
loop: \
	VMOVUPS 0(DI), Y0 \
	VMOVUPS 32(DI), Y1 \
	VMOVUPS 64(DI), Y2 \
	VMOVUPS 96(DI), Y3 \
	DIV     Y15, Y0, Y0 \
	DIV     Y15, Y1, Y1 \
	DIV     Y15, Y2, Y2 \
	DIV     Y15, Y3, Y3 \
	STORE4 \
	ADDQ    $128, DI \
	DECQ    CX \
	JNZ     loop \
	VZEROUPPER \
done: \
	RET

// func scaleF32AVX2(d *float32, n int, x float32)
TEXT ·scaleF32AVX2(SB), NOSPLIT, $0-20
	BY32(VDIVPS)

// func mulF32AVX2(d *float32, n int, x float32)
TEXT ·mulF32AVX2(SB), NOSPLIT, $0-20
	BY32(VMULPS)

// func scaleF64AVX2(d *float64, n int, x float64)
TEXT ·scaleF64AVX2(SB), NOSPLIT, $0-24
	BY64(VDIVPD)

// func mulF64AVX2(d *float64, n int, x float64)
TEXT ·mulF64AVX2(SB), NOSPLIT, $0-24
	BY64(VMULPD)
