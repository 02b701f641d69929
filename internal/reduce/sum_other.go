//go:build !amd64

package reduce

// sumFloat32 is the float32 Sum kernel (the portable loop on this
// architecture).
func sumFloat32(d, s []float32) { sum(d, s) }

// sumFloat64 is the float64 Sum kernel (the portable loop here).
func sumFloat64(d, s []float64) { sum(d, s) }

// foldFloat32 is the float32 kernel of Prod, Min and Max (the portable
// loop here).
func foldFloat32(d, s []float32, op Op) { apply(d, s, op) }

// foldFloat64 is foldFloat32 for float64.
func foldFloat64(d, s []float64, op Op) { apply(d, s, op) }

// scaleFloat32 divides every element by n (the portable loop here).
func scaleFloat32(v []float32, n float32) { scale(v, n) }

// scaleFloat64 is scaleFloat32 for float64.
func scaleFloat64(v []float64, n float64) { scale(v, n) }
