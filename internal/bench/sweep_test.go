package bench

import (
	"slices"
	"testing"
)

func TestParseFloat32Sizes(t *testing.T) {
	got, err := ParseFloat32Sizes("4, 7,1K,16M,1G")
	if err != nil || !slices.Equal(got, []int64{4, 4, 1024, 16 << 20, 1 << 30}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "2", "1025M", "x", "4,-8"} {
		if _, err := ParseFloat32Sizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
