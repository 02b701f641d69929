package ringtail

import (
	"unsafe"

	"github.com/ringtail-ml/ringtail/internal/reduce"
)

// DType is an element type.
type DType = reduce.DType

// Element types.
const (
	Float32  = reduce.Float32
	Float64  = reduce.Float64
	Int32    = reduce.Int32
	Int64    = reduce.Int64
	Float16  = reduce.Float16
	BFloat16 = reduce.BFloat16
	Uint8    = reduce.Uint8
)

// Op is a reduction operator.
type Op = reduce.Op

// Reduction operators. Avg divides the sum by the world size (truncating
// for integer types).
const (
	Sum  = reduce.Sum
	Prod = reduce.Prod
	Min  = reduce.Min
	Max  = reduce.Max
	Avg  = reduce.Avg
)

// Buffer is a typed view of memory a collective reads or writes: raw bytes
// and their element type. Build one with Float32s, Float64s, ... or Raw.
type Buffer struct {
	Bytes []byte
	DType DType
}

// Len returns the number of elements.
func (b Buffer) Len() int {
	if s := b.DType.Size(); s > 0 {
		return len(b.Bytes) / s
	}
	return 0
}

func bytesOf[T any](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// Float32s views v as a float32 Buffer (no copy).
func Float32s(v []float32) Buffer { return Buffer{bytesOf(v), Float32} }

// Float64s views v as a float64 Buffer (no copy).
func Float64s(v []float64) Buffer { return Buffer{bytesOf(v), Float64} }

// Int32s views v as an int32 Buffer (no copy).
func Int32s(v []int32) Buffer { return Buffer{bytesOf(v), Int32} }

// Int64s views v as an int64 Buffer (no copy).
func Int64s(v []int64) Buffer { return Buffer{bytesOf(v), Int64} }

// Float16s views v, IEEE binary16 bit patterns, as a float16 Buffer.
func Float16s(v []uint16) Buffer { return Buffer{bytesOf(v), Float16} }

// BFloat16s views v, bfloat16 bit patterns, as a bfloat16 Buffer.
func BFloat16s(v []uint16) Buffer { return Buffer{bytesOf(v), BFloat16} }

// Raw views b as elements of dt (for C callers and tensors).
func Raw(b []byte, dt DType) Buffer { return Buffer{b, dt} }
