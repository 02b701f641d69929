//go:build !amd64

package reduce

// sumFloat32 is the float32 Sum kernel (the portable loop on this
// architecture).
func sumFloat32(d, s []float32) { sum(d, s) }

// sumFloat64 is the float64 Sum kernel (the portable loop here).
func sumFloat64(d, s []float64) { sum(d, s) }
