package reduce

import (
	"fmt"
	"unsafe"
)

type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8
}

// view reinterprets a byte slice as a slice of T. len(b) must be a multiple
// of the element size; callers check that once per buffer.
func view[T any](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// Apply folds src into dst element-wise: dst[i] = dst[i] op src[i]. Avg
// folds like Sum; the division happens once, in Scale. dst and src must have
// the same length, a multiple of dt.Size(). Apply never allocates.
func Apply(dst, src []byte, dt DType, op Op) error {
	if len(dst) != len(src) {
		return fmt.Errorf("reduce: length mismatch %d != %d", len(dst), len(src))
	}
	sz := dt.Size()
	if sz == 0 {
		return fmt.Errorf("reduce: invalid %v", dt)
	}
	if !op.Valid() {
		return fmt.Errorf("reduce: invalid %v", op)
	}
	if len(dst)%sz != 0 {
		return fmt.Errorf("reduce: length %d is not a multiple of %v's %d bytes", len(dst), dt, sz)
	}
	switch dt {
	case Float32:
		if op == Sum || op == Avg {
			sumFloat32(view[float32](dst), view[float32](src))
			return nil
		}
		foldFloat32(view[float32](dst), view[float32](src), op)
	case Float64:
		if op == Sum || op == Avg {
			sumFloat64(view[float64](dst), view[float64](src))
			return nil
		}
		foldFloat64(view[float64](dst), view[float64](src), op)
	case Int32:
		apply(view[int32](dst), view[int32](src), op)
	case Int64:
		apply(view[int64](dst), view[int64](src), op)
	case Uint8:
		apply(view[uint8](dst), view[uint8](src), op)
	case Float16:
		applyF16(view[uint16](dst), view[uint16](src), op)
	case BFloat16:
		applyBF16(view[uint16](dst), view[uint16](src), op)
	}
	return nil
}

func apply[T number](d, s []T, op Op) {
	switch op {
	case Sum, Avg:
		sum(d, s)
	case Prod:
		prod(d, s)
	case Min:
		s = s[:len(d)]
		for i := range d {
			d[i] = min(d[i], s[i])
		}
	case Max:
		s = s[:len(d)]
		for i := range d {
			d[i] = max(d[i], s[i])
		}
	}
}

// sum is the hot loop of every allreduce: unrolled by 8 with bounds checks
// hoisted, it runs at memory bandwidth (see BenchmarkApply).
func sum[T number](d, s []T) {
	n := len(d)
	s = s[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		dd := d[i : i+8 : i+8]
		ss := s[i : i+8 : i+8]
		dd[0] += ss[0]
		dd[1] += ss[1]
		dd[2] += ss[2]
		dd[3] += ss[3]
		dd[4] += ss[4]
		dd[5] += ss[5]
		dd[6] += ss[6]
		dd[7] += ss[7]
	}
	for ; i < n; i++ {
		d[i] += s[i]
	}
}

func prod[T number](d, s []T) {
	n := len(d)
	s = s[:n]
	i := 0
	for ; i+4 <= n; i += 4 {
		dd := d[i : i+4 : i+4]
		ss := s[i : i+4 : i+4]
		dd[0] *= ss[0]
		dd[1] *= ss[1]
		dd[2] *= ss[2]
		dd[3] *= ss[3]
	}
	for ; i < n; i++ {
		d[i] *= s[i]
	}
}

// scaleBlock is how many bytes ApplyScaled folds before it divides them:
// the division then reads what the fold has just written from the
// first-level cache instead of making a second pass over memory.
const scaleBlock = 16 << 10

// ApplyScaled folds src into dst and then, when div > 0, divides the
// result by div: Apply followed by Scale, bit for bit, done block by block
// (the Avg finalisation fused into the last fold of a segment). div 0
// only folds.
func ApplyScaled(dst, src []byte, dt DType, op Op, div int) error {
	if div == 0 || len(dst) != len(src) {
		return Apply(dst, src, dt, op)
	}
	if div < 0 {
		return fmt.Errorf("reduce: scale by %d", div)
	}
	for off := 0; off < len(dst); off += scaleBlock {
		end := min(off+scaleBlock, len(dst))
		if err := Apply(dst[off:end], src[off:end], dt, op); err != nil {
			return err
		}
		if err := Scale(dst[off:end], dt, div); err != nil {
			return err
		}
	}
	return nil
}

// Scale divides every element of buf by n (the Avg finalisation). Integer
// types use truncating division; 16-bit floats divide in float32.
func Scale(buf []byte, dt DType, n int) error {
	if n <= 0 {
		return fmt.Errorf("reduce: scale by %d", n)
	}
	sz := dt.Size()
	if sz == 0 || len(buf)%sz != 0 {
		return fmt.Errorf("reduce: cannot scale %d bytes of %v", len(buf), dt)
	}
	switch dt {
	case Float32:
		scaleFloat32(view[float32](buf), float32(n))
	case Float64:
		scaleFloat64(view[float64](buf), float64(n))
	case Int32:
		scale(view[int32](buf), int32(n))
	case Int64:
		scale(view[int64](buf), int64(n))
	case Uint8:
		scale(view[uint8](buf), uint8(min(n, 255)))
	case Float16:
		scaleF16(view[uint16](buf), float32(n))
	case BFloat16:
		scaleBF16(view[uint16](buf), float32(n))
	}
	return nil
}

func scale[T number](v []T, n T) {
	for i := range v {
		v[i] /= n
	}
}
