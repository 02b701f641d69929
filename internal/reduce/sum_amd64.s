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
