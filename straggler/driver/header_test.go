package driver

import (
	"slices"
	"testing"

	"github.com/ringtail-ml/ringtail"
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

// fixedDecider holds one plan.
type fixedDecider struct{ plan straggler.Plan }

func (f fixedDecider) Config() straggler.Config {
	return straggler.Config{World: len(f.plan.Shares), GlobalBatch: 8}
}
func (f fixedDecider) Plan() straggler.Plan { return f.plan }
func (f fixedDecider) Observe(straggler.Report) (straggler.Plan, error) {
	return f.plan, nil
}

// A parent stages a state of a version past 2²⁴ and its child adopts it:
// the child's Node holds that very version (its next gradient is computed
// on it), and an older state, one step before, is refused as older.
func TestAStateOfAVersionPast2To24IsAdoptedExactly(t *testing.T) {
	plan := straggler.Ring(0, 2, 8)
	plan.Mode, plan.Members, plan.Evicted = straggler.ModeEvict, []int{0}, []int{1}
	plan.Parents = []straggler.Edge{{Child: 1, Parent: 0}}
	node, err := straggler.NewNode(1, fixedDecider{plan})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]float32, 2)
	child := &Driver{rank: 1, node: node, state: [][]float32{params}}
	parent := &Driver{}
	parent.SetState([]float32{1.5, -2})
	deliver := func(version int) straggler.Adoption {
		t.Helper()
		data := parent.stage(make([]float32, parent.stateN), version, 0)
		a, err := child.adopt(&ringtail.Contribution{From: 0, Data: ringtail.Float32s(slices.Clone(data))})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	const v = 1<<24 + 1
	if a := deliver(v); !a.Take {
		t.Fatalf("state of version %d not taken", v)
	}
	if got := node.Next(); got != v || params[0] != 1.5 || params[1] != -2 {
		t.Fatalf("child holds version %d and parameters %v, want version %d and [1.5 -2]", got, params, v)
	}
	if a := deliver(v - 1); a.Take {
		t.Fatalf("state of version %d taken after version %d", v-1, v)
	}
}
