package topology

import (
	"fmt"
	"math"
)

// Matrix is a dense square matrix of pairwise link measurements indexed by
// rank ID: m[i][j] is the link from rank i to rank j. ringtail uses two: a
// bandwidth matrix in bytes per second and a latency matrix in seconds. An
// entry of 0 off the diagonal means "not measured"; the diagonal is
// ignored. A nil or empty Matrix means nothing has been measured.
type Matrix [][]float64

// NewMatrix returns an n×n matrix of zeros (nothing measured).
func NewMatrix(n int) Matrix {
	m := make(Matrix, n)
	cells := make([]float64, n*n)
	for i := range m {
		m[i] = cells[i*n : (i+1)*n : (i+1)*n]
	}
	return m
}

// N returns the number of ranks the matrix covers.
func (m Matrix) N() int { return len(m) }

// At returns m[i][j], or 0 (not measured) when i or j is outside the
// matrix.
func (m Matrix) At(i, j int) float64 {
	if i < 0 || j < 0 || i >= len(m) || j >= len(m[i]) {
		return 0
	}
	return m[i][j]
}

// Validate reports whether m is square with finite, non-negative entries.
func (m Matrix) Validate() error {
	if err := m.validateShape(); err != nil {
		return err
	}
	for i, row := range m {
		for j := range row {
			if err := m.validateEntry(i, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateShape reports whether m is square.
func (m Matrix) validateShape() error {
	for i, row := range m {
		if len(row) != len(m) {
			return fmt.Errorf("%w: matrix row %d has %d entries, want %d", ErrInvalidInput, i, len(row), len(m))
		}
	}
	return nil
}

// validateEntry reports whether m[i][j], if inside m, is finite and
// non-negative.
func (m Matrix) validateEntry(i, j int) error {
	if x := m.At(i, j); math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return fmt.Errorf("%w: matrix[%d][%d] = %v, want finite and >= 0", ErrInvalidInput, i, j, x)
	}
	return nil
}

// link returns the bandwidth of the undirected link a–b: the slower
// direction when both are measured, else whichever is, else 0. Parents and
// children talk both ways (gradients up, parameters down), so the slower
// direction is what they get.
func link(bw Matrix, a, b int) float64 {
	x, y := bw.At(a, b), bw.At(b, a)
	switch {
	case x > 0 && y > 0:
		return min(x, y)
	default:
		return max(x, y)
	}
}
