package reduce

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// halfType describes one 16-bit element type for the kernel tests: the
// dispatching fold and scale (vector where the CPU has it) and the portable
// reference loops.
type halfType struct {
	name           string
	vector         bool
	apply, applyP  func(d, s []uint16, op Op)
	scale, scaleP  func(v []uint16, n float32)
	widen          func(uint16) float32
	narrow         func(float32) uint16
	special        []uint16
	quiet, expMask uint16
}

func halfTypes() []halfType {
	return []halfType{
		{
			name: "float16", vector: halfVector.f16,
			apply: applyF16, applyP: applyF16Portable, scale: scaleF16, scaleP: scaleF16Portable,
			widen: F16ToF32, narrow: F32ToF16, quiet: 0x0200, expMask: 0x7c00,
			special: []uint16{
				0x0000, 0x8000, // ±0
				0x0001, 0x8001, 0x0002, 0x03ff, 0x83ff, 0x0200, // subnormals
				0x0400, 0x8400, 0x0401, // smallest normals
				0x3c00, 0xbc00, 0x3c01, 0x4000, 0x3555, 0x6800, 0x6801, // 1, -1, 1+ulp, 2, 1/3, 2048
				0x7bff, 0xfbff, 0x7bfe, 0x5bff, // max finite, neighbours
				0x7c00, 0xfc00, // ±Inf
				0x7e00, 0xfe00, 0x7e01, 0x7fff, 0xffff, // quiet NaNs with payloads
				0x7c01, 0xfc01, 0x7d00, 0x7dff, 0xfd55, // signalling NaNs
			},
		},
		{
			name: "bfloat16", vector: halfVector.bf16,
			apply: applyBF16, applyP: applyBF16Portable, scale: scaleBF16, scaleP: scaleBF16Portable,
			widen: BF16ToF32, narrow: F32ToBF16, quiet: 0x0040, expMask: 0x7f80,
			special: []uint16{
				0x0000, 0x8000, // ±0
				0x0001, 0x8001, 0x007f, 0x0040, 0x807f, // subnormals
				0x0080, 0x8080, 0x0081, // smallest normals
				0x3f80, 0xbf80, 0x3f81, 0x4000, 0x3eab, 0x4b80, 0x4b81, // 1, -1, 1+ulp, 2, 1/3, 2^24
				0x7f7f, 0xff7f, 0x7f7e, 0x7eff, // max finite, neighbours
				0x7f80, 0xff80, // ±Inf
				0x7fc0, 0xffc0, 0x7fc1, 0x7fff, 0xffff, // quiet NaNs with payloads
				0x7f81, 0xff81, 0x7fa0, 0x7fbf, 0xffaa, // signalling NaNs
			},
		},
	}
}

var foldOps = []Op{Sum, Prod, Min, Max, Avg}

// requireVector skips a kernel test where the CPU has no vector kernel for
// the type: it would compare the portable loop with itself.
func requireVector(t *testing.T, ht halfType) {
	t.Helper()
	if !ht.vector {
		t.Skipf("no %s vector kernel on this CPU/architecture: only the portable loop runs", ht.name)
	}
}

// compareFold runs the dispatching fold and the portable loop on copies of
// d and s and fails on the first element whose bits differ.
func compareFold(t *testing.T, ht halfType, op Op, d, s []uint16, what string) {
	t.Helper()
	got, want := append([]uint16(nil), d...), append([]uint16(nil), d...)
	ht.apply(got, s, op)
	ht.applyP(want, s, op)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s %v %s [%d]: %#04x op %#04x: kernel %#04x, portable %#04x", ht.name, op, what, i, d[i], s[i], got[i], want[i])
		}
	}
}

// TestHalfKernelsMatchPortableExhaustive folds every one of the 65536 bit
// patterns against each special value (NaNs of both kinds and signs,
// infinities, ±0, subnormals, max finite, rounding neighbours) and against
// random patterns, in both operand orders, for every operator.
func TestHalfKernelsMatchPortableExhaustive(t *testing.T) {
	rng := rand.New(rand.NewSource(15))
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	rep := make([]uint16, len(all))
	for _, ht := range halfTypes() {
		t.Run(ht.name, func(t *testing.T) {
			requireVector(t, ht)
			others := append([]uint16(nil), ht.special...)
			for range 16 {
				others = append(others, uint16(rng.Uint32()))
			}
			for _, op := range foldOps {
				for _, b := range others {
					for i := range rep {
						rep[i] = b
					}
					compareFold(t, ht, op, all, rep, fmt.Sprintf("all op %#04x", b))
					compareFold(t, ht, op, rep, all, fmt.Sprintf("%#04x op all", b))
				}
			}
		})
	}
}

// TestHalfKernelsMatchPortableRandomAndTails checks random bit patterns
// (each element drawn from specials or uniformly) over every length 0..64
// and three misalignments, and that nothing outside the slice is written.
func TestHalfKernelsMatchPortableRandomAndTails(t *testing.T) {
	rng := rand.New(rand.NewSource(16))
	for _, ht := range halfTypes() {
		t.Run(ht.name, func(t *testing.T) {
			requireVector(t, ht)
			draw := func() uint16 {
				if rng.Intn(4) == 0 {
					return ht.special[rng.Intn(len(ht.special))]
				}
				return uint16(rng.Uint32())
			}
			for _, op := range foldOps {
				for n := 0; n <= 64; n++ {
					for off := 0; off < 3; off++ {
						const guard = 0x5a5a
						d, s := make([]uint16, off+n+1), make([]uint16, off+n+1)
						for i := range d {
							d[i], s[i] = draw(), draw()
						}
						d[len(d)-1] = guard
						compareFold(t, ht, op, d[off:off+n], s[off:off+n], fmt.Sprintf("n=%d off=%d", n, off))
						before := append([]uint16(nil), d...)
						ht.apply(d[off:off+n], s[off:off+n], op)
						for i := 0; i < off; i++ {
							if d[i] != before[i] {
								t.Fatalf("%s %v n=%d off=%d: wrote [%d] before the slice", ht.name, op, n, off, i)
							}
						}
						if d[len(d)-1] != guard {
							t.Fatalf("%s %v n=%d off=%d: wrote past the slice", ht.name, op, n, off)
						}
					}
				}
				d, s := make([]uint16, 4099), make([]uint16, 4099)
				for i := range d {
					d[i], s[i] = draw(), draw()
				}
				compareFold(t, ht, op, d, s, "random 4099")
			}
		})
	}
}

// TestHalfScaleMatchesPortable divides all 65536 patterns by rank counts
// (including one not exact in float32) and every tail length.
func TestHalfScaleMatchesPortable(t *testing.T) {
	for _, ht := range halfTypes() {
		t.Run(ht.name, func(t *testing.T) {
			requireVector(t, ht)
			for _, n := range []int{1, 2, 3, 4, 7, 8, 1000, 1<<25 + 1} {
				for _, length := range []int{1 << 16, 0, 1, 15, 16, 17, 31, 33, 63, 64} {
					v := make([]uint16, length)
					for i := range v {
						v[i] = uint16(i * 40503) // all patterns when length is 65536
					}
					got, want := append([]uint16(nil), v...), append([]uint16(nil), v...)
					ht.scale(got, float32(n))
					ht.scaleP(want, float32(n))
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%s %#04x / %d (len %d): kernel %#04x, portable %#04x", ht.name, v[i], n, length, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestHalfNaNContract pins the portable rule every kernel matches: the
// destination's NaN wins, then the source's, then the default NaN; the
// result is quiet; float16 keeps only the NaN's sign, bfloat16 its payload.
func TestHalfNaNContract(t *testing.T) {
	fold := func(ht halfType, a, b uint16, op Op) uint16 {
		d, s := []uint16{a}, []uint16{b}
		ht.applyP(d, s, op)
		return d[0]
	}
	f16, bf16 := halfTypes()[0], halfTypes()[1]
	cases := []struct {
		ht      halfType
		a, b    uint16
		op      Op
		want    uint16
		explain string
	}{
		{f16, 0xfe01, 0x7e00, Sum, 0xfe00, "destination NaN wins, payload dropped"},
		{f16, 0x3c00, 0x7d00, Sum, 0x7e00, "source sNaN comes out quiet"},
		{f16, 0x7c00, 0xfc00, Sum, 0xfe00, "Inf-Inf is the default NaN"},
		{f16, 0x0000, 0x7c00, Prod, 0xfe00, "0*Inf is the default NaN"},
		{f16, 0x3c00, 0xfc01, Min, 0xfe00, "min with a NaN source is that NaN"},
		{f16, 0x7c01, 0xfc00, Max, 0x7e00, "max with a NaN destination is that NaN"},
		{f16, 0x8000, 0x0000, Min, 0x8000, "min(-0, +0) = -0"},
		{f16, 0x0000, 0x8000, Max, 0x0000, "max(+0, -0) = +0"},
		{bf16, 0xff81, 0x7fc0, Sum, 0xffc1, "destination sNaN wins, quieted, payload kept"},
		{bf16, 0x3f80, 0x7fa5, Prod, 0x7fe5, "source sNaN quieted, payload kept"},
		{bf16, 0x7f80, 0xff80, Sum, 0xffc0, "Inf-Inf is the default NaN"},
		{bf16, 0x7fc3, 0x3f80, Min, 0x7fc3, "min with a NaN destination is that NaN"},
		{bf16, 0x7f7f, 0x7f7f, Sum, 0x7f80, "max finite doubled overflows to Inf"},
	}
	for _, c := range cases {
		if got := fold(c.ht, c.a, c.b, c.op); got != c.want {
			t.Errorf("%s %#04x %v %#04x = %#04x, want %#04x (%s)", c.ht.name, c.a, c.op, c.b, got, c.want, c.explain)
		}
	}
	// The rule agrees with plain float32 arithmetic whenever no NaN is
	// involved: every non-NaN result is the rounded float32 result.
	for _, ht := range halfTypes() {
		for _, a := range ht.special {
			for _, b := range ht.special {
				x, y := ht.widen(a), ht.widen(b)
				r := x + y
				if r != r {
					continue
				}
				if got := fold(ht, a, b, Sum); got != ht.narrow(r) {
					t.Errorf("%s %#04x+%#04x = %#04x, want %#04x", ht.name, a, b, got, ht.narrow(r))
				}
			}
		}
	}
	if math.Float32bits(nanRule(float32(math.Inf(1))-float32(math.Inf(1)), 1, 2)) != defaultNaNBits {
		t.Error("default NaN not applied")
	}
}

// BenchmarkHalfFold measures Apply and Scale on 16-bit buffers (bytes of
// one buffer per second, like BenchmarkApply) in cache (64 KiB per buffer)
// and out of cache (64 MiB), with float32 as the yardstick. It goes
// through the exported entry points only, so the same benchmark runs on
// older revisions for before/after numbers:
//
//	go test -run '^$' -bench HalfFold ./internal/reduce
func BenchmarkHalfFold(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"64KiB", 64 << 10}, {"64MiB", 64 << 20}} {
		d, s := make([]byte, size.bytes), make([]byte, size.bytes)
		for _, dt := range []DType{Float32, Float16, BFloat16} {
			for _, op := range []Op{Sum, Prod, Min, Max} {
				b.Run(dt.String()+"/"+op.String()+"/"+size.name, func(b *testing.B) {
					b.SetBytes(int64(size.bytes))
					for b.Loop() {
						_ = Apply(d, s, dt, op)
					}
				})
			}
			b.Run(dt.String()+"/scale/"+size.name, func(b *testing.B) {
				b.SetBytes(int64(size.bytes))
				for b.Loop() {
					_ = Scale(d, dt, 4)
				}
			})
		}
	}
}

// BenchmarkHalfPortable measures the portable 16-bit Sum loops (the
// fallback, and the reference the kernels are tested against), in cache.
func BenchmarkHalfPortable(b *testing.B) {
	const n = 32 << 10
	d, s := make([]uint16, n), make([]uint16, n)
	for _, ht := range halfTypes() {
		b.Run(ht.name+"/sum/64KiB", func(b *testing.B) {
			b.SetBytes(2 * n)
			for b.Loop() {
				ht.applyP(d, s, Sum)
			}
		})
	}
}
