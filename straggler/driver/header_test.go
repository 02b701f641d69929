package driver

import (
	"testing"

	"github.com/ringtail-ml/ringtail/straggler"
)

// The state header carries versions and flags as integers: a version past
// 2²⁴ (where float32 stops holding every integer) and past 2³² come back
// exactly, and the state's data follows the header untouched.
func TestStateHeaderCarriesVersionsExactly(t *testing.T) {
	d := &Driver{state: [][]float32{{1.5, -2}, {7}}}
	d.SetState(d.state...)
	for _, c := range []struct {
		version int
		flags   straggler.StateFlags
	}{
		{0, 0},
		{3, straggler.StateFull},
		{1<<24 + 1, straggler.StateFull | straggler.StateRejoin},
		{1<<33 + 5, straggler.StateFull | straggler.StateFinal},
		{1<<24 + 1, 0},
	} {
		b := make([]float32, d.stateN)
		data := d.stage(b, c.version, c.flags)
		v, f, err := readStateHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		if v != c.version || f != c.flags {
			t.Fatalf("staged version %d flags %d, read back version %d flags %d", c.version, c.flags, v, f)
		}
		want := []float32{1.5, -2}
		if c.flags&straggler.StateFull != 0 {
			want = append(want, 7)
		}
		got := data[stateHeader:]
		if len(got) != len(want) {
			t.Fatalf("version %d: data %v, want %v", c.version, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("version %d: data %v, want %v", c.version, got, want)
			}
		}
	}
	if _, _, err := readStateHeader(make([]float32, stateHeader-1)); err == nil {
		t.Fatal("a message shorter than the header decoded")
	}
}
