package ringtail

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/reduce"
)

// Every element type with every operator, against a sequential reference:
// values are small integers, exact in every type and in any order.
func TestAllReduceEveryTypeAndOp(t *testing.T) {
	const n = 3
	comms := startComms(t, n, func(c *Config) { c.SmallBytes = 512 })
	ctx := context.Background()
	types := []DType{Float32, Float64, Int32, Int64, Float16, BFloat16, Uint8}
	ops := []Op{Sum, Prod, Min, Max, Avg}
	for _, dt := range types {
		for _, op := range ops {
			for _, count := range []int{0, 1, 13, 10007} {
				name := fmt.Sprintf("%v/%v/%d", dt, op, count)
				value := func(r, i int) float64 { return float64((r+i)%3 + 1) }
				bufs := make([]Buffer, n)
				for r := range bufs {
					bufs[r] = Raw(make([]byte, count*dt.Size()), dt)
					for i := 0; i < count; i++ {
						put(bufs[r], i, value(r, i))
					}
				}
				noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(ctx, bufs[r], op) }))
				for i := 0; i < count; i++ {
					want := value(0, i)
					for r := 1; r < n; r++ {
						v := value(r, i)
						switch op {
						case Sum, Avg:
							want += v
						case Prod:
							want *= v
						case Min:
							want = math.Min(want, v)
						case Max:
							want = math.Max(want, v)
						}
					}
					if op == Avg {
						want /= n
						if dt == Int32 || dt == Int64 || dt == Uint8 {
							want = math.Trunc(want)
						}
					}
					tol := 0.0
					if op == Avg && (dt == Float16 || dt == BFloat16) {
						tol = 0.02
					}
					for r := range bufs {
						if got := get(bufs[r], i); math.Abs(got-want) > tol*want {
							t.Fatalf("%s: rank %d elem %d = %v, want %v", name, r, i, got, want)
						}
					}
				}
			}
		}
	}
}

func put(b Buffer, i int, v float64) {
	switch b.DType {
	case Float32:
		bits := math.Float32bits(float32(v))
		b.Bytes[4*i], b.Bytes[4*i+1], b.Bytes[4*i+2], b.Bytes[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	case Float64:
		bits := math.Float64bits(v)
		for k := 0; k < 8; k++ {
			b.Bytes[8*i+k] = byte(bits >> (8 * k))
		}
	case Int32:
		u := uint32(int32(v))
		b.Bytes[4*i], b.Bytes[4*i+1], b.Bytes[4*i+2], b.Bytes[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	case Int64:
		u := uint64(int64(v))
		for k := 0; k < 8; k++ {
			b.Bytes[8*i+k] = byte(u >> (8 * k))
		}
	case Float16, BFloat16:
		h := reduce.F32ToF16(float32(v))
		if b.DType == BFloat16 {
			h = reduce.F32ToBF16(float32(v))
		}
		b.Bytes[2*i], b.Bytes[2*i+1] = byte(h), byte(h>>8)
	case Uint8:
		b.Bytes[i] = uint8(v)
	}
}

func get(b Buffer, i int) float64 {
	switch b.DType {
	case Float32:
		return float64(math.Float32frombits(uint32(b.Bytes[4*i]) | uint32(b.Bytes[4*i+1])<<8 | uint32(b.Bytes[4*i+2])<<16 | uint32(b.Bytes[4*i+3])<<24))
	case Float64:
		var u uint64
		for k := 0; k < 8; k++ {
			u |= uint64(b.Bytes[8*i+k]) << (8 * k)
		}
		return math.Float64frombits(u)
	case Int32:
		return float64(int32(uint32(b.Bytes[4*i]) | uint32(b.Bytes[4*i+1])<<8 | uint32(b.Bytes[4*i+2])<<16 | uint32(b.Bytes[4*i+3])<<24))
	case Int64:
		var u uint64
		for k := 0; k < 8; k++ {
			u |= uint64(b.Bytes[8*i+k]) << (8 * k)
		}
		return float64(int64(u))
	case Float16:
		return float64(reduce.F16ToF32(uint16(b.Bytes[2*i]) | uint16(b.Bytes[2*i+1])<<8))
	case BFloat16:
		return float64(reduce.BF16ToF32(uint16(b.Bytes[2*i]) | uint16(b.Bytes[2*i+1])<<8))
	}
	return float64(b.Bytes[i])
}

// One program serves every element type: a call that fit the fastboxes as
// float32 must not be sent through them as float64 (twice the bytes).
func TestSameCountWiderTypeLeavesTheFastPath(t *testing.T) {
	comms := startComms(t, 2, nil)
	ctx := context.Background()
	const count = 2000 // float32: 8000 B, ring segments 4000 B (fastbox); float64: segments 8000 B
	f32 := [][]float32{make([]float32, count), make([]float32, count)}
	f64 := [][]float64{make([]float64, count), make([]float64, count)}
	for r := 0; r < 2; r++ {
		for i := 0; i < count; i++ {
			f32[r][i], f64[r][i] = float32(r+i), float64(r*i)+0.5
		}
	}
	noErrors(t, each(comms, func(r int, c *Comm) error {
		if err := c.AllReduce(ctx, Float32s(f32[r]), Sum); err != nil {
			return err
		}
		return c.AllReduce(ctx, Float64s(f64[r]), Sum)
	}))
	for r := 0; r < 2; r++ {
		for i := 0; i < count; i++ {
			if f32[r][i] != float32(2*i+1) || f64[r][i] != float64(i)+1 {
				t.Fatalf("rank %d elem %d: %v %v", r, i, f32[r][i], f64[r][i])
			}
		}
	}
}
