package reduce

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"unsafe"
)

func bytesOf[T any](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// naive is the obviously-correct reference the unrolled kernels are checked against.
func naive(a, b float64, op Op) float64 {
	switch op {
	case Sum, Avg:
		return a + b
	case Prod:
		return a * b
	case Min:
		return math.Min(a, b)
	default:
		return math.Max(a, b)
	}
}

func TestApplyMatchesNaiveEveryTypeAndOp(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 7, 8, 9, 17, 1031} {
		for op := Sum; op <= Avg; op++ {
			a32, b32 := make([]float32, n), make([]float32, n)
			a64, b64 := make([]float64, n), make([]float64, n)
			ai, bi := make([]int32, n), make([]int32, n)
			al, bl := make([]int64, n), make([]int64, n)
			for i := 0; i < n; i++ {
				a32[i], b32[i] = rng.Float32()*4-2, rng.Float32()*4-2
				a64[i], b64[i] = rng.Float64()*4-2, rng.Float64()*4-2
				ai[i], bi[i] = int32(rng.Intn(200)-100), int32(rng.Intn(200)-100)
				al[i], bl[i] = int64(rng.Intn(2000)-1000), int64(rng.Intn(2000)-1000)
			}
			w32 := append([]float32(nil), a32...)
			w64 := append([]float64(nil), a64...)
			wi := append([]int32(nil), ai...)
			wl := append([]int64(nil), al...)
			mustApply(t, bytesOf(w32), bytesOf(b32), Float32, op)
			mustApply(t, bytesOf(w64), bytesOf(b64), Float64, op)
			mustApply(t, bytesOf(wi), bytesOf(bi), Int32, op)
			mustApply(t, bytesOf(wl), bytesOf(bl), Int64, op)
			for i := 0; i < n; i++ {
				if want := float32(naive(float64(a32[i]), float64(b32[i]), op)); op != Prod && op != Sum && op != Avg && w32[i] != want {
					t.Fatalf("float32 %v n=%d i=%d: got %v want %v", op, n, i, w32[i], want)
				}
				if want := a32[i] + b32[i]; (op == Sum || op == Avg) && w32[i] != want {
					t.Fatalf("float32 sum n=%d i=%d: got %v want %v", n, i, w32[i], want)
				}
				if want := a32[i] * b32[i]; op == Prod && w32[i] != want {
					t.Fatalf("float32 prod i=%d: got %v want %v", i, w32[i], want)
				}
				if want := naive(a64[i], b64[i], op); w64[i] != want {
					t.Fatalf("float64 %v i=%d: got %v want %v", op, i, w64[i], want)
				}
				if want := int32(naive(float64(ai[i]), float64(bi[i]), op)); wi[i] != want {
					t.Fatalf("int32 %v i=%d: got %v want %v", op, i, wi[i], want)
				}
				if want := int64(naive(float64(al[i]), float64(bl[i]), op)); wl[i] != want {
					t.Fatalf("int64 %v i=%d: got %v want %v", op, i, wl[i], want)
				}
			}
		}
	}
}

func mustApply(t *testing.T, d, s []byte, dt DType, op Op) {
	t.Helper()
	if err := Apply(d, s, dt, op); err != nil {
		t.Fatal(err)
	}
}

func TestHalfPrecisionAccumulatesInFloat32(t *testing.T) {
	// 2048 + 1 is not representable in float16 (spacing 2 there); the sum is
	// computed in float32 (2049) and rounded to even (2048).
	d := []uint16{F32ToF16(2048), F32ToF16(1.5)}
	s := []uint16{F32ToF16(1), F32ToF16(0.25)}
	mustApply(t, bytesOf(d), bytesOf(s), Float16, Sum)
	if got := F16ToF32(d[0]); got != 2048 {
		t.Fatalf("2048+1 in float16 = %v, want 2048 (round to even)", got)
	}
	if got := F16ToF32(d[1]); got != 1.75 {
		t.Fatalf("1.5+0.25 = %v", got)
	}
	b := []uint16{F32ToBF16(3), F32ToBF16(-2)}
	c := []uint16{F32ToBF16(4), F32ToBF16(8)}
	mustApply(t, bytesOf(b), bytesOf(c), BFloat16, Prod)
	if BF16ToF32(b[0]) != 12 || BF16ToF32(b[1]) != -16 {
		t.Fatalf("bf16 prod: %v %v", BF16ToF32(b[0]), BF16ToF32(b[1]))
	}
}

func TestF16RoundTripEveryValue(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f { // NaN stays NaN
			if g := F16ToF32(F32ToF16(f)); g == g {
				t.Fatalf("NaN %#x did not stay NaN", h)
			}
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestF16RoundsToNearestEven(t *testing.T) {
	cases := []struct {
		in   float32
		want float32
	}{
		{1 + 1.0/2048, 1},                              // halfway between 1 and 1+2^-10: to even (1)
		{1 + 3.0/2048, 1 + 2.0/1024},                   // halfway, odd below: up
		{65519, 65504},                                 // largest finite
		{65520, float32(math.Inf(1))},                  // overflows
		{5.960464477539063e-08, 5.960464477539063e-08}, // smallest subnormal
		{2.9e-08, 0},                                   // below half the smallest subnormal
	}
	for _, c := range cases {
		if got := F16ToF32(F32ToF16(c.in)); got != c.want {
			t.Errorf("f16(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := BF16ToF32(F32ToBF16(1 + 1.0/256)); got != 1 {
		t.Errorf("bf16 tie to even: %v", got)
	}
	if got := BF16ToF32(F32ToBF16(1 + 3.0/256)); got != 1+2.0/128 {
		t.Errorf("bf16 tie up: %v", got)
	}
}

func TestApplyRejectsBadInput(t *testing.T) {
	if Apply(make([]byte, 8), make([]byte, 4), Float32, Sum) == nil {
		t.Error("length mismatch accepted")
	}
	if Apply(make([]byte, 6), make([]byte, 6), Float32, Sum) == nil {
		t.Error("partial element accepted")
	}
	if Apply(make([]byte, 4), make([]byte, 4), DType(99), Sum) == nil {
		t.Error("bad dtype accepted")
	}
	if Apply(make([]byte, 4), make([]byte, 4), Float32, Op(0)) == nil {
		t.Error("bad op accepted")
	}
}

func TestScaleAverages(t *testing.T) {
	f := []float32{4, 6, -3}
	if err := Scale(bytesOf(f), Float32, 4); err != nil {
		t.Fatal(err)
	}
	if f[0] != 1 || f[1] != 1.5 || f[2] != -0.75 {
		t.Fatalf("scale: %v", f)
	}
	i := []int64{7, -7}
	_ = Scale(bytesOf(i), Int64, 2)
	if i[0] != 3 || i[1] != -3 {
		t.Fatalf("int scale truncates toward zero: %v", i)
	}
}

func TestParseNames(t *testing.T) {
	for d := Float32; d <= Uint8; d++ {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), got, err)
		}
	}
	for o := Sum; o <= Avg; o++ {
		got, err := ParseOp(o.String())
		if err != nil || got != o {
			t.Errorf("ParseOp(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseDType("complex64"); err == nil {
		t.Error("unknown dtype accepted")
	}
}

func BenchmarkApply(b *testing.B) {
	for _, c := range []struct {
		name string
		dt   DType
	}{{"float32", Float32}, {"float64", Float64}, {"int32", Int32}, {"float16", Float16}, {"bfloat16", BFloat16}} {
		const n = 1 << 20
		d, s := make([]byte, n), make([]byte, n)
		b.Run(c.name+"/1MiB", func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = Apply(d, s, c.dt, Sum)
			}
		})
	}
}

// TestSumKernelsMatchPortableLoop checks the vector Sum kernels bit for bit
// against the portable loop: every length around the vector widths, every
// alignment of the tail, and inputs with NaNs, infinities, signed zeros and
// subnormals.
func TestSumKernelsMatchPortableLoop(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	special32 := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, 1e-40}
	special64 := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, math.MaxFloat64, 1e-310}
	for n := 0; n <= 200; n++ {
		for off := 0; off < 3; off++ {
			d32, s32 := make([]float32, n+off), make([]float32, n+off)
			d64, s64 := make([]float64, n+off), make([]float64, n+off)
			for i := range d32 {
				d32[i], s32[i] = float32(rng.NormFloat64()*1e3), float32(rng.NormFloat64())
				d64[i], s64[i] = rng.NormFloat64()*1e6, rng.NormFloat64()
				if rng.Intn(8) == 0 {
					d32[i], s64[i] = special32[rng.Intn(len(special32))], special64[rng.Intn(len(special64))]
				}
			}
			w32 := append([]float32(nil), d32...)
			w64 := append([]float64(nil), d64...)
			sum(w32[off:], s32[off:])
			sum(w64[off:], s64[off:])
			sumFloat32(d32[off:], s32[off:])
			sumFloat64(d64[off:], s64[off:])
			for i := range d32 {
				if math.Float32bits(d32[i]) != math.Float32bits(w32[i]) {
					t.Fatalf("float32 n=%d off=%d [%d]: kernel %v, loop %v", n, off, i, d32[i], w32[i])
				}
				if math.Float64bits(d64[i]) != math.Float64bits(w64[i]) {
					t.Fatalf("float64 n=%d off=%d [%d]: kernel %v, loop %v", n, off, i, d64[i], w64[i])
				}
			}
		}
	}
}

// TestFloatKernelsMatchPortableLoop checks the vector Prod, Min, Max and
// Scale kernels bit for bit against the portable loops: every length
// around the vector widths and every tail alignment with random values,
// and every pair of special values (NaNs with different payloads and
// signs, quiet and signalling, infinities, signed zeros, subnormals) in
// both operand orders, where Min and Max must pick the NaN and the zero's
// sign exactly as Go's min and max do.
func TestFloatKernelsMatchPortableLoop(t *testing.T) {
	nan32 := func(bits uint32) float32 { return math.Float32frombits(bits) }
	nan64 := func(bits uint64) float64 { return math.Float64frombits(bits) }
	special32 := []float32{nan32(0x7fc00000), nan32(0xffc00001), nan32(0x7f800001), nan32(0xff812345), // quiet and signalling NaNs
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1, -1, 2.5,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1e-40}
	special64 := []float64{nan64(0x7ff8000000000000), nan64(0xfff8000000000001), nan64(0x7ff0000000000001), nan64(0xfff0000012345678),
		math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1, 2.5,
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64, 1e-310}
	check32 := func(what string, got, want []float32) {
		t.Helper()
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("float32 %s [%d]: kernel %#08x, loop %#08x", what, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
	check64 := func(what string, got, want []float64) {
		t.Helper()
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("float64 %s [%d]: kernel %#016x, loop %#016x", what, i, math.Float64bits(got[i]), math.Float64bits(want[i]))
			}
		}
	}
	run := func(what string, d32, s32 []float32, d64, s64 []float64) {
		t.Helper()
		for _, op := range []Op{Prod, Min, Max} {
			g32, w32 := slices.Clone(d32), slices.Clone(d32)
			foldFloat32(g32, s32, op)
			apply(w32, s32, op)
			g64, w64 := slices.Clone(d64), slices.Clone(d64)
			foldFloat64(g64, s64, op)
			apply(w64, s64, op)
			if op == Prod {
				// x86 returns the first of two NaN operands, and the
				// compiler orders a product's operands as it likes (the
				// -race build swaps them): a product of two NaNs only
				// has to be a NaN. Min and Max are not commutative, so
				// Go's lowering fixes their order.
				for i := range g32 {
					if d32[i] != d32[i] && s32[i] != s32[i] && g32[i] != g32[i] && w32[i] != w32[i] {
						g32[i] = w32[i]
					}
				}
				for i := range g64 {
					if d64[i] != d64[i] && s64[i] != s64[i] && g64[i] != g64[i] && w64[i] != w64[i] {
						g64[i] = w64[i]
					}
				}
			}
			check32(fmt.Sprintf("%s %v", what, op), g32, w32)
			check64(fmt.Sprintf("%s %v", what, op), g64, w64)
		}
		for _, n := range []int{1, 2, 3, 4, 6, 8, 1 << 20} {
			g32, w32 := slices.Clone(d32), slices.Clone(d32)
			scaleFloat32(g32, float32(n))
			scale(w32, float32(n))
			check32(fmt.Sprintf("%s scale %d", what, n), g32, w32)
			g64, w64 := slices.Clone(d64), slices.Clone(d64)
			scaleFloat64(g64, float64(n))
			scale(w64, float64(n))
			check64(fmt.Sprintf("%s scale %d", what, n), g64, w64)
		}
	}
	rng := rand.New(rand.NewSource(11))
	for n := 0; n <= 140; n++ {
		for off := 0; off < 3; off++ {
			d32, s32 := make([]float32, n+off), make([]float32, n+off)
			d64, s64 := make([]float64, n+off), make([]float64, n+off)
			for i := range d32 {
				d32[i], s32[i] = float32(rng.NormFloat64()*1e3), float32(rng.NormFloat64())
				d64[i], s64[i] = rng.NormFloat64()*1e6, rng.NormFloat64()
				if rng.Intn(6) == 0 {
					d32[i], s32[i] = special32[rng.Intn(len(special32))], special32[rng.Intn(len(special32))]
					d64[i], s64[i] = special64[rng.Intn(len(special64))], special64[rng.Intn(len(special64))]
				}
			}
			run(fmt.Sprintf("n=%d off=%d", n, off), d32[off:], s32[off:], d64[off:], s64[off:])
		}
	}
	// Every ordered pair of specials, 64 lanes at a time so that each
	// lands in the vector bulk.
	var d32, s32 []float32
	var d64, s64 []float64
	for _, a := range special32 {
		for _, b := range special32 {
			d32, s32 = append(d32, a), append(s32, b)
		}
	}
	for _, a := range special64 {
		for _, b := range special64 {
			d64, s64 = append(d64, a), append(s64, b)
		}
	}
	run("special pairs", d32, s32, d64, s64)
}

// TestApplyScaledIsApplyThenScale checks the fused Avg finalisation bit for
// bit against a whole-buffer Apply followed by Scale: every type and op,
// random bytes (so every NaN, infinity and subnormal pattern shows up),
// lengths around the block size and several blocks long, with tails.
func TestApplyScaledIsApplyThenScale(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for dt := Float32; dt <= Uint8; dt++ {
		es := dt.Size()
		for op := Sum; op <= Avg; op++ {
			for _, elems := range []int{0, 1, 7, scaleBlock/es - 1, scaleBlock / es, scaleBlock/es + 1, 3*scaleBlock/es + 5} {
				for _, div := range []int{0, 2, 3, 7} {
					d := make([]byte, elems*es)
					s := make([]byte, elems*es)
					rng.Read(d)
					rng.Read(s)
					want := append([]byte(nil), d...)
					mustApply(t, want, s, dt, op)
					if div > 0 {
						if err := Scale(want, dt, div); err != nil {
							t.Fatal(err)
						}
					}
					if err := ApplyScaled(d, s, dt, op, div); err != nil {
						t.Fatalf("%v %v %d elements /%d: %v", dt, op, elems, div, err)
					}
					if !bytes.Equal(d, want) {
						i := 0
						for d[i] == want[i] {
							i++
						}
						t.Fatalf("%v %v %d elements /%d: byte %d (element %d) is %#x, want %#x", dt, op, elems, div, i, i/es, d[i], want[i])
					}
				}
			}
		}
	}
	if err := ApplyScaled(make([]byte, 4), make([]byte, 4), Float32, Sum, -1); err == nil {
		t.Error("a negative divisor was accepted")
	}
}
