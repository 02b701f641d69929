package topology

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// DefaultTolerance is the ParentPolicy.Tolerance AssignParents uses. A
// parent is comparable for a child when its link is at least half the
// child's best link: a parent with two children splits its link between
// them, so an idle parent at half the best bandwidth serves a child as
// well as sharing the best one.
const DefaultTolerance = 0.5

// MaxEvicted is the most evicted ranks one call can place. STAR evicts a
// handful of stragglers at a time; the limit keeps the solver's integer
// costs exact.
const MaxEvicted = 1024

// ParentPolicy says how evicted ranks are attached to ring members.
type ParentPolicy struct {
	// MaxChildren is the most children one parent may take, >= 1.
	MaxChildren int
	// Tolerance in [0, 1] defines a comparable parent: one whose link to
	// the child is at least (1-Tolerance) times the child's best link to
	// any ring member. 0 means only the best links (ties) are comparable.
	Tolerance float64
}

// Validate reports whether p is usable.
func (p ParentPolicy) Validate() error {
	if p.MaxChildren < 1 {
		return fmt.Errorf("%w: MaxChildren %d, want >= 1", ErrInvalidInput, p.MaxChildren)
	}
	if math.IsNaN(p.Tolerance) || p.Tolerance < 0 || p.Tolerance > 1 {
		return fmt.Errorf("%w: Tolerance %v, want in [0, 1]", ErrInvalidInput, p.Tolerance)
	}
	return nil
}

// Assignment attaches one evicted rank to its parent.
type Assignment struct {
	// Child is the evicted rank.
	Child int
	// Parent is the ring member it reports gradients to and receives
	// parameters from.
	Parent int
	// Bandwidth is the link bandwidth between them (the slower direction;
	// 0 if unmeasured).
	Bandwidth float64
}

// AssignParents attaches each evicted rank to a ring member with
// ParentPolicy{MaxChildren: maxChildren, Tolerance: DefaultTolerance}.
func AssignParents(ring []int, evicted []int, bw Matrix, maxChildren int) ([]Assignment, error) {
	return ParentPolicy{MaxChildren: maxChildren, Tolerance: DefaultTolerance}.Assign(ring, evicted, bw)
}

// Assign attaches each evicted rank (STAR §IV-B) to a ring member, its
// parent, and returns one Assignment per evicted rank, ordered by Child.
//
// The link between a child c and a ring member p is the slower direction of
// bw between them. The result is an exact minimum, over all assignments in
// which no parent has more than MaxChildren children, of, in order:
//
//  1. the number of children whose parent is not comparable (see
//     Tolerance) — children go to high-bandwidth parents;
//  2. the sum over parents of (number of children)² — among comparable
//     parents, load is spread (STAR §IV-D2: "the fewest existing
//     children"). In particular no parent has two children while a
//     comparable parent of one of them has none;
//  3. the sum over children of the parent's rank in the child's preference
//     (how many ring members have a strictly faster link to the child) —
//     the remaining freedom goes to bandwidth.
//
// Among assignments equal on all three the choice is deterministic and
// does not depend on the order of ring or evicted. A child with no measured
// links finds every parent comparable and is placed for balance alone.
//
// Errors wrap ErrInvalidInput (bad policy or matrix, duplicate or
// out-of-range IDs, a rank both in the ring and evicted, an empty ring,
// more than MaxEvicted children) or ErrNoCapacity (more children than
// len(ring)·MaxChildren).
func (p ParentPolicy) Assign(ring []int, evicted []int, bw Matrix) ([]Assignment, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("topology: assign parents: %w", err)
	}
	// Only the entries between children and ring members are read and
	// checked: validating a whole 4096×4096 matrix would cost more than
	// the assignment.
	if err := bw.validateShape(); err != nil {
		return nil, fmt.Errorf("topology: assign parents: %w", err)
	}
	if err := checkIDs("ring", ring, bw); err != nil {
		return nil, fmt.Errorf("topology: assign parents: %w", err)
	}
	if err := checkIDs("evicted", evicted, bw); err != nil {
		return nil, fmt.Errorf("topology: assign parents: %w", err)
	}
	children := slices.Clone(evicted)
	slices.Sort(children)
	members := slices.Clone(ring)
	slices.Sort(members)
	x := len(children)
	switch {
	case x == 0:
		return []Assignment{}, nil
	case len(members) == 0:
		return nil, fmt.Errorf("topology: assign parents: %w: empty ring", ErrInvalidInput)
	case x > MaxEvicted:
		return nil, fmt.Errorf("topology: assign parents: %w: %d evicted ranks, at most %d", ErrInvalidInput, x, MaxEvicted)
	case x > len(members)*p.MaxChildren:
		return nil, fmt.Errorf("topology: assign parents: %w: %d evicted ranks, %d ring members × %d children", ErrNoCapacity, x, len(members), p.MaxChildren)
	}
	for _, c := range children {
		if _, found := slices.BinarySearch(members, c); found {
			return nil, fmt.Errorf("topology: assign parents: %w: rank %d is both in the ring and evicted", ErrInvalidInput, c)
		}
	}

	// Each child needs only its x best candidates: of any x, one is free
	// of other children, and moving there never worsens the objective.
	type candidate struct {
		parent     int
		bw         float64
		rank       int
		comparable bool
	}
	cands := make([][]candidate, x)
	for i, c := range children {
		all := make([]candidate, len(members))
		for j, m := range members {
			if err := errors.Join(bw.validateEntry(c, m), bw.validateEntry(m, c)); err != nil {
				return nil, fmt.Errorf("topology: assign parents: %w", err)
			}
			all[j] = candidate{parent: m, bw: link(bw, c, m)}
		}
		slices.SortFunc(all, func(a, b candidate) int {
			return cmp.Or(cmp.Compare(b.bw, a.bw), cmp.Compare(a.parent, b.parent))
		})
		all = slices.Clip(all[:min(x, len(all))])
		best := all[0].bw
		for j := range all {
			if j > 0 && all[j].bw == all[j-1].bw {
				all[j].rank = all[j-1].rank
			} else {
				all[j].rank = j
			}
			all[j].comparable = all[j].bw >= (1-p.Tolerance)*best
		}
		cands[i] = all
	}

	// Nodes: source, children, the parents some child lists (ascending),
	// sink. Costs pack the three objectives into one integer:
	// nonComparable·w1 + (Σ k²)·w2 + Σ rank, with w2 > any Σ rank and
	// w1 > any (Σ k²)·w2 + Σ rank.
	var used []int
	for _, cs := range cands {
		for _, cd := range cs {
			used = append(used, cd.parent)
		}
	}
	slices.Sort(used)
	used = slices.Compact(used)
	degree := make([]int, len(used))
	for _, cs := range cands {
		for _, cd := range cs {
			j, _ := slices.BinarySearch(used, cd.parent)
			degree[j]++
		}
	}
	x64 := int64(x)
	w2 := x64 * x64
	w1 := w2*w2 + w2 + 1
	source, sink := 0, 1+x+len(used)
	g := newFlowGraph(sink + 1)
	arcs := make([][]int, x)
	for i, cs := range cands {
		g.addArc(source, 1+i, 1, 0)
		for _, cd := range cs {
			j, _ := slices.BinarySearch(used, cd.parent)
			cost := int64(cd.rank)
			if !cd.comparable {
				cost += w1
			}
			arcs[i] = append(arcs[i], g.addArc(1+i, 1+x+j, 1, cost))
		}
	}
	for j := range used {
		for k := 1; k <= min(p.MaxChildren, degree[j]); k++ {
			g.addArc(1+x+j, sink, 1, int64(2*k-1)*w2)
		}
	}
	if sent := g.run(source, sink, x); sent != x {
		return nil, fmt.Errorf("topology: assign parents: %w: placed %d of %d evicted ranks", ErrNoCapacity, sent, x)
	}

	out := make([]Assignment, x)
	for i, c := range children {
		for k, a := range arcs[i] {
			if g.flow(a) == 1 {
				cd := cands[i][k]
				out[i] = Assignment{Child: c, Parent: cd.parent, Bandwidth: cd.bw}
			}
		}
	}
	return out, nil
}
