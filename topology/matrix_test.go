package topology

import (
	"errors"
	"math"
	"testing"
)

func TestMatrix_AtValidateAndLink(t *testing.T) {
	m := NewMatrix(3)
	m[0][1], m[1][0] = 4, 6
	m[0][2] = 5
	if m.N() != 3 || m.At(0, 1) != 4 || m.At(-1, 0) != 0 || m.At(0, 3) != 0 {
		t.Fatal("At")
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if link(m, 0, 1) != 4 || link(m, 1, 0) != 4 {
		t.Error("both directions measured: want the slower")
	}
	if link(m, 2, 0) != 5 || link(m, 1, 2) != 0 {
		t.Error("one or no direction measured")
	}
	m[1][2] = math.NaN()
	if err := m.Validate(); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("NaN: err = %v", err)
	}
	if err := (Matrix{{0, 1}, {0}}).Validate(); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("ragged: err = %v", err)
	}
	if err := (Matrix(nil)).Validate(); err != nil {
		t.Errorf("empty: %v", err)
	}
}
