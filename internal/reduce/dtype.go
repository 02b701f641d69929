package reduce

import "fmt"

// DType is the element type of a collective's buffer.
type DType uint8

// Element types understood by every collective.
const (
	Float32 DType = iota + 1
	Float64
	Int32
	Int64
	Float16
	BFloat16
	Uint8
)

var dtypeNames = [...]string{Float32: "float32", Float64: "float64", Int32: "int32", Int64: "int64", Float16: "float16", BFloat16: "bfloat16", Uint8: "uint8"}

// Size returns the element size in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case Float64, Int64:
		return 8
	case Float16, BFloat16:
		return 2
	case Uint8:
		return 1
	}
	return 0
}

// Valid reports whether d names a supported element type.
func (d DType) Valid() bool { return d.Size() > 0 }

// String returns the nccl-tests style name of the type ("float32", ...).
func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType parses a type name as printed by String; "float", "half" and
// "bf16" are accepted as nccl-tests aliases.
func ParseDType(s string) (DType, error) {
	switch s {
	case "float", "f32":
		return Float32, nil
	case "double", "f64":
		return Float64, nil
	case "half", "f16", "fp16":
		return Float16, nil
	case "bf16":
		return BFloat16, nil
	case "int":
		return Int32, nil
	}
	for d, n := range dtypeNames {
		if n != "" && n == s {
			return DType(d), nil
		}
	}
	return 0, fmt.Errorf("unknown element type %q (want float32, float64, int32, int64, float16, bfloat16 or uint8)", s)
}

// Op is a reduction operator.
type Op uint8

// Reduction operators. Avg is Sum followed by a division by the number of
// contributing ranks (truncating for integer types).
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
	Avg
)

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", Avg: "avg"}

// Valid reports whether o names a supported operator.
func (o Op) Valid() bool { return o >= Sum && o <= Avg }

// String returns the operator's name ("sum", ...).
func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp parses an operator name as printed by String.
func ParseOp(s string) (Op, error) {
	for o, n := range opNames {
		if n != "" && n == s {
			return Op(o), nil
		}
	}
	return 0, fmt.Errorf("unknown reduction op %q (want sum, prod, min, max or avg)", s)
}
