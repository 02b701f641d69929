package exec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ringtail-ml/ringtail/internal/reduce"
)

// The reference the executor is checked against is sequential float64
// arithmetic on small integers: every element type holds them exactly, and
// every sum, product, minimum and maximum of them is exact in any order,
// so the executor's result must equal the reference bit for bit.

var (
	dtypes = []reduce.DType{reduce.Float32, reduce.Float64, reduce.Int32, reduce.Int64, reduce.Float16, reduce.BFloat16, reduce.Uint8}
	redOps = []reduce.Op{reduce.Sum, reduce.Prod, reduce.Min, reduce.Max, reduce.Avg}
)

var ne = binary.NativeEndian

// encode stores vals (small integers) as elements of dt.
func encode(dt reduce.DType, vals []float64) []byte {
	es := dt.Size()
	b := make([]byte, len(vals)*es)
	for i, v := range vals {
		p := b[i*es:]
		switch dt {
		case reduce.Float32:
			ne.PutUint32(p, math.Float32bits(float32(v)))
		case reduce.Float64:
			ne.PutUint64(p, math.Float64bits(v))
		case reduce.Int32:
			ne.PutUint32(p, uint32(int32(v)))
		case reduce.Int64:
			ne.PutUint64(p, uint64(int64(v)))
		case reduce.Float16:
			ne.PutUint16(p, reduce.F32ToF16(float32(v)))
		case reduce.BFloat16:
			ne.PutUint16(p, reduce.F32ToBF16(float32(v)))
		case reduce.Uint8:
			p[0] = uint8(v)
		default:
			panic(fmt.Sprintf("encode: %v", dt))
		}
	}
	return b
}

// decode reads the elements of b as float64.
func decode(dt reduce.DType, b []byte) []float64 {
	es := dt.Size()
	out := make([]float64, len(b)/es)
	for i := range out {
		p := b[i*es:]
		switch dt {
		case reduce.Float32:
			out[i] = float64(math.Float32frombits(ne.Uint32(p)))
		case reduce.Float64:
			out[i] = math.Float64frombits(ne.Uint64(p))
		case reduce.Int32:
			out[i] = float64(int32(ne.Uint32(p)))
		case reduce.Int64:
			out[i] = float64(int64(ne.Uint64(p)))
		case reduce.Float16:
			out[i] = float64(reduce.F16ToF32(ne.Uint16(p)))
		case reduce.BFloat16:
			out[i] = float64(reduce.BF16ToF32(ne.Uint16(p)))
		case reduce.Uint8:
			out[i] = float64(p[0])
		}
	}
	return out
}

// contribution is element i of the contribution of the member at position
// pos of k members to a reduction with op. Sums are multiples of k (the
// first member balances the others), so Avg is exact in every type;
// products stay below 2^k.
func contribution(op reduce.Op, pos, k, i int) float64 {
	switch op {
	case reduce.Sum, reduce.Avg:
		if pos > 0 {
			return float64((i*7+pos*3)%3 + 1)
		}
		v := float64(k * (3 + i%4))
		for q := 1; q < k; q++ {
			v -= float64((i*7+q*3)%3 + 1)
		}
		return v
	case reduce.Prod:
		return float64((i+pos)%2 + 1)
	}
	return float64((i*5 + pos*11) % 50)
}

// fold is the sequential reduction of a and b with op (Avg folds as Sum).
func fold(op reduce.Op, a, b float64) float64 {
	switch op {
	case reduce.Prod:
		return a * b
	case reduce.Min:
		return math.Min(a, b)
	case reduce.Max:
		return math.Max(a, b)
	}
	return a + b
}

// reference reduces ins element-wise with op; Avg divides by len(ins)
// (exact: see contribution).
func reference(op reduce.Op, ins [][]float64) []float64 {
	out := append([]float64(nil), ins[0]...)
	for _, in := range ins[1:] {
		for i := range out {
			out[i] = fold(op, out[i], in[i])
		}
	}
	if op == reduce.Avg {
		for i := range out {
			out[i] /= float64(len(ins))
		}
	}
	return out
}

// pattern is element i of rank r's data in a collective that moves data
// without reducing it: distinct small integers every type holds exactly.
func pattern(r, i int) float64 { return float64((r*31 + i*7 + 1) % 251) }

// equal reports the first index where got and want differ, or -1.
func firstDiff(got, want []float64) int {
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}
