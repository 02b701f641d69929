//go:build cgo

package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"unsafe"
)

// TestStragglerHeaderMatches keeps ringtail.h's straggler constants equal
// to the Go ones.
func TestStragglerHeaderMatches(t *testing.T) {
	b, err := os.ReadFile("include/ringtail.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (RT_[A-Z0-9_]+) (\d+)`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[2])
		defs[m[1]] = n
	}
	want := map[string]int{
		"RT_STRAGGLER_EQUAL_SHARES": flagEqualShares, "RT_STRAGGLER_PROBE": flagProbe, "RT_STRAGGLER_SAMPLED": flagSampled,
		"RT_MODE_EXCLUDE": modeExclude,
		"RT_ROLE_MEMBER":  roleMember, "RT_ROLE_PARENT": roleParent, "RT_ROLE_CHILD": roleChild,
		"RT_MODE_RING": modeRing, "RT_MODE_OVERLAP": modeOverlap, "RT_MODE_EVICT": modeEvict,
	}
	for name, v := range want {
		if got, ok := defs[name]; !ok || got != v {
			t.Errorf("ringtail.h: %s = %d (defined %v), Go has %d", name, got, ok, v)
		}
	}
}

// stragglerRank is one rank of a toy training run over the C ABI's Go
// side: a state of params parameters plus one optimizer slot, SGD on a
// gradient that depends on the parameters and the step.
type stragglerRank struct {
	rank    int
	run     *stragglerRun
	state   []float32 // parameters, then one optimizer value
	params  int
	grad    []float32
	applied map[int]int // member step → samples applied
	flushed int         // samples the flush applied
	steps   int         // gradients this rank computed
	roles   map[int]int // role → steps
	modes   map[int]int // mode of the member steps executed → count
}

func newStragglerRank(t *testing.T, s *session, params int, policy string) *stragglerRank {
	t.Helper()
	r, err := openStraggler(s, int64(params), policy, int64(s.comm.Size()), flagEqualShares, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	sr := &stragglerRank{rank: s.comm.Rank(), run: r, state: make([]float32, params+1), params: params,
		grad: make([]float32, params), applied: map[int]int{}, roles: map[int]int{}, modes: map[int]int{}}
	for i := range sr.state {
		sr.state[i] = float32(i%7) * 0.25
	}
	if err := r.setState(unsafe.Pointer(&sr.state[0]), int64(params), int64(params+1)); err != nil {
		t.Fatal(err)
	}
	return sr
}

// gradient fills grad from the parameters, the rank and a counter, in
// small integers so every sum is exact.
func (sr *stragglerRank) gradient() {
	for i := range sr.grad {
		sr.grad[i] = float32((sr.rank+1)*(i%5) + sr.steps%3)
	}
}

// apply takes an SGD step on the mean over applied samples and bumps the
// optimizer slot, as every member (and, through the flush, every rank)
// does identically.
func (sr *stragglerRank) apply(applied int) {
	for i := 0; i < sr.params; i++ {
		sr.state[i] -= 0.01 * sr.grad[i] / float32(applied)
	}
	sr.state[sr.params]++
}

// TestStragglerDriverEvictsAndLosesNothing runs three ranks over the C
// ABI's Go side with rank 2 reporting three times the others' compute:
// it must become a child (the policy decides from the reported times, so
// the outcome does not depend on the machine's speed), every gradient
// computed must be applied exactly once, and after the flush every rank
// holds the same state.
func TestStragglerDriverEvictsAndLosesNothing(t *testing.T) {
	const world, params, memberSteps = 3, 64, 40
	ss := openWorld(t, world)
	ranks := make([]*stragglerRank, world)
	for r, s := range ss {
		ranks[r] = newStragglerRank(t, s, params, "star")
	}
	each(t, ss, func(r int, s *session) error {
		sr := ranks[r]
		computeUS := int64(100_000)
		if r == world-1 {
			computeUS = 300_000
		}
		for {
			rep, err := sr.stepOnce(computeUS)
			if err != nil {
				return err
			}
			if rep.done || (rep.role != roleChild && rep.step == memberSteps-1) {
				break
			}
		}
		rep, err := sr.run.flush(unsafe.Pointer(&sr.grad[0]))
		if err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		sr.flushed = rep.applied
		if rep.applied > 0 {
			sr.apply(rep.applied)
		}
		return nil
	})
	slow := ranks[world-1]
	if slow.roles[roleChild] == 0 {
		t.Fatalf("rank %d (3x compute) never became a child: roles %v", world-1, slow.roles)
	}
	if ranks[0].modes[modeEvict] == 0 {
		t.Errorf("rank 0 executed no evict step: modes %v", ranks[0].modes)
	}
	// Every member step's applied samples, as its members saw them (they
	// must agree), plus the flush, equal the gradients computed.
	all := map[int]int{}
	computed := 0
	for _, sr := range ranks {
		computed += sr.steps
		for step, n := range sr.applied {
			if prev, ok := all[step]; ok && prev != n {
				t.Errorf("step %d: rank %d applied %d samples, another member %d", step, sr.rank, n, prev)
			}
			all[step] = n
		}
		if sr.flushed != ranks[0].flushed {
			t.Errorf("rank %d flushed %d samples, rank 0 %d", sr.rank, sr.flushed, ranks[0].flushed)
		}
	}
	total := ranks[0].flushed
	for _, n := range all {
		total += n
	}
	if total != computed {
		t.Errorf("applied %d samples (member steps %d, flush %d), computed %d", total, len(all), ranks[0].flushed, computed)
	}
	for _, sr := range ranks[1:] {
		if !slices.Equal(sr.state, ranks[0].state) {
			t.Errorf("rank %d's state differs from rank 0's after the flush", sr.rank)
		}
	}
}

// stepOnce computes a gradient, steps, and applies the result as a member.
func (sr *stragglerRank) stepOnce(computeUS int64) (stepReport, error) {
	sr.gradient()
	sr.steps++
	rep, err := sr.run.step(unsafe.Pointer(&sr.grad[0]), 1, computeUS, computeUS)
	if err != nil {
		return rep, fmt.Errorf("step %d: %w", sr.steps, err)
	}
	sr.roles[rep.role]++
	if rep.role != roleChild {
		sr.modes[rep.mode]++
		sr.applied[rep.step] = rep.applied
		sr.apply(rep.applied)
	} else if rep.applied != 0 {
		return rep, fmt.Errorf("a child's step applied %d samples", rep.applied)
	}
	return rep, nil
}

// TestStragglerDriverExactModeSums checks the exact policy over the C ABI's
// Go side: whatever mode it picks, each step's buffer is the exact sum of
// every rank's gradient, and nobody is evicted.
func TestStragglerDriverExactModeSums(t *testing.T) {
	const world, params, steps = 3, 10, 12
	ss := openWorld(t, world)
	var mu sync.Mutex
	modes := map[int]int{}
	each(t, ss, func(r int, s *session) error {
		run, err := openStraggler(s, params, "exact", world, flagEqualShares, 20_000)
		if err != nil {
			return err
		}
		state := make([]float32, params)
		if err := run.setState(unsafe.Pointer(&state[0]), params, params); err != nil {
			return err
		}
		g := make([]float32, params)
		for k := range steps {
			for i := range g {
				g[i] = float32(r*100 + i + k)
			}
			compute := int64(100_000)
			if r == 1 {
				compute = 250_000
			}
			rep, err := run.step(unsafe.Pointer(&g[0]), 1, compute, compute)
			if err != nil {
				return err
			}
			if rep.applied != world || rep.role == roleChild || rep.evicted != 0 {
				return fmt.Errorf("step %d: %+v, want %d applied by members", k, rep, world)
			}
			for i, v := range g {
				if want := float32(300 + 3*(i+k)); v != want {
					return fmt.Errorf("step %d: element %d = %v, want %v", k, i, v, want)
				}
			}
			mu.Lock()
			modes[rep.mode]++
			mu.Unlock()
		}
		_, err = run.flush(unsafe.Pointer(&g[0]))
		return err
	})
	if modes[modeEvict] != 0 {
		t.Errorf("exact policy evicted: modes %v", modes)
	}
	if modes[modeOverlap] == 0 {
		t.Logf("the exact policy never chose overlap (modes %v)", modes)
	}
}

// TestStragglerBadArguments: every bad argument is an RT_ERR_INVALID error
// that leaves the communicator usable.
func TestStragglerBadArguments(t *testing.T) {
	ss := openWorld(t, 1)
	s := ss[0]
	for _, c := range []struct {
		payload, batch int64
		policy         string
		flags          int
		timeout        int64
	}{
		{-1, 1, "star", 0, 0}, {4, 0, "star", 0, 0}, {4, 1, "nope", 0, 0}, {4, 1, "star", 8, 0}, {4, 1, "star", 0, -1},
	} {
		if _, err := openStraggler(s, c.payload, c.policy, c.batch, c.flags, c.timeout); code(err) != codeInvalid {
			t.Errorf("open %+v: code %d (%v), want invalid", c, code(err), err)
		}
	}
	r, err := openStraggler(s, 4, "star", 1, flagEqualShares, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := make([]float32, 4)
	if _, err := r.step(unsafe.Pointer(&g[0]), 1, 1, 1); code(err) != codeInvalid {
		t.Errorf("step without a state: %v", err)
	}
	if err := r.setState(nil, 2, 4); code(err) != codeInvalid {
		t.Errorf("NULL state: %v", err)
	}
	if err := r.setState(unsafe.Pointer(&g[0]), 5, 4); code(err) != codeInvalid {
		t.Errorf("params > total: %v", err)
	}
	if err := r.setState(unsafe.Pointer(&g[0]), 4, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := r.step(unsafe.Pointer(&g[0]), -1, 1, 1); code(err) != codeInvalid {
		t.Errorf("negative samples: %v", err)
	}
	g[0] = 3
	rep, err := r.step(unsafe.Pointer(&g[0]), 2, 10, 10)
	if err != nil || rep.applied != 2 || g[0] != 3 {
		t.Errorf("a world of one: %+v %v, g %v", rep, err, g)
	}
	if _, err := r.flush(nil); code(err) != codeInvalid {
		t.Errorf("flush into NULL: %v", err)
	}
	if _, err := r.flush(unsafe.Pointer(&g[0])); err != nil {
		t.Fatal(err)
	}
	if _, err := r.step(unsafe.Pointer(&g[0]), 1, 1, 1); code(err) != codeInvalid {
		t.Errorf("step after the flush: %v", err)
	}
	if err := s.barrier(); err != nil {
		t.Errorf("the communicator is unusable after bad arguments: %v", err)
	}
}
