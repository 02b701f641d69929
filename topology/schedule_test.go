package topology

import (
	"errors"
	"slices"
	"testing"
)

// runSchedule executes s in memory: rank i starts with the unit vector
// e_i; in each round every Send carries the sender's vector as it stood at
// the start of the round, and every Recv must match exactly one Send. It
// returns each member's final vector.
func runSchedule(t *testing.T, s Schedule) map[int][]int {
	t.Helper()
	n := len(s.Ranks)
	pos := map[int]int{}
	state := map[int][]int{}
	for i, r := range s.Ranks {
		pos[r] = i
		state[r] = make([]int, n)
		state[r][i] = 1
	}
	for i, steps := range s.Steps {
		if !slices.IsSortedFunc(steps, func(a, b Step) int { return a.Round - b.Round }) {
			t.Fatalf("rank %d: steps not sorted by round: %+v", s.Ranks[i], steps)
		}
	}
	type msg struct{ from, to int }
	for r := 0; r < s.Rounds; r++ {
		inflight := map[msg][]int{}
		for i, steps := range s.Steps {
			from := s.Ranks[i]
			for _, st := range steps {
				if st.Round == r && st.Op == Send {
					m := msg{from, st.Peer}
					if _, dup := inflight[m]; dup {
						t.Fatalf("round %d: %d sends to %d twice", r, from, st.Peer)
					}
					inflight[m] = slices.Clone(state[from])
				}
			}
		}
		next := map[int][]int{}
		for k, v := range state {
			next[k] = slices.Clone(v)
		}
		for i, steps := range s.Steps {
			to := s.Ranks[i]
			for _, st := range steps {
				if st.Round != r || st.Op != Recv {
					continue
				}
				m := msg{st.Peer, to}
				payload, ok := inflight[m]
				if !ok {
					t.Fatalf("round %d: %d receives from %d, which sends nothing", r, to, st.Peer)
				}
				delete(inflight, m)
				if st.Reduce {
					for k := range payload {
						next[to][k] += payload[k]
					}
				} else {
					next[to] = payload
				}
			}
		}
		if len(inflight) > 0 {
			t.Fatalf("round %d: unreceived sends %v", r, inflight)
		}
		state = next
	}
	for i, steps := range s.Steps {
		for _, st := range steps {
			if st.Round < 0 || st.Round >= s.Rounds {
				t.Fatalf("rank %d: step %+v outside %d rounds", s.Ranks[i], st, s.Rounds)
			}
			if _, ok := pos[st.Peer]; !ok || st.Peer == s.Ranks[i] {
				t.Fatalf("rank %d: bad peer in %+v", s.Ranks[i], st)
			}
		}
	}
	return state
}

// minRounds is the fewest rounds in which one rank can reach n: holders at
// most double each round.
func minRounds(n int) int {
	r := 0
	for holders := 1; holders < n; holders *= 2 {
		r++
	}
	return r
}

// members returns n distinct, unsorted rank IDs.
func members(n int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = (i*7 + 3) % (7 * n)
	}
	return m
}

func ones(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func TestBinomialBroadcast_EveryoneGetsRootsBufferInMinimalRounds(t *testing.T) {
	for n := 1; n <= 33; n++ {
		ms := members(n)
		for _, root := range []int{ms[0], ms[n/2], ms[n-1]} {
			s, err := BinomialBroadcast(ms, root)
			if err != nil {
				t.Fatal(err)
			}
			if s.Rounds != minRounds(n) {
				t.Fatalf("n=%d: %d rounds, want %d", n, s.Rounds, minRounds(n))
			}
			final := runSchedule(t, s)
			want := make([]int, n)
			want[slices.Index(ms, root)] = 1
			for _, m := range ms {
				if !slices.Equal(final[m], want) {
					t.Fatalf("n=%d root=%d: rank %d ends with %v, want %v", n, root, m, final[m], want)
				}
			}
		}
	}
}

func TestBinomialReduce_RootGetsEachContributionOnce(t *testing.T) {
	for n := 1; n <= 33; n++ {
		ms := members(n)
		for _, root := range []int{ms[0], ms[n/2], ms[n-1]} {
			s, err := BinomialReduce(ms, root)
			if err != nil {
				t.Fatal(err)
			}
			if s.Rounds != minRounds(n) {
				t.Fatalf("n=%d: %d rounds, want %d", n, s.Rounds, minRounds(n))
			}
			if got := runSchedule(t, s)[root]; !slices.Equal(got, ones(n)) {
				t.Fatalf("n=%d root=%d: root ends with %v", n, root, got)
			}
		}
	}
}

// Reduce runs the broadcast tree backwards: same parent/child pairs.
func TestBinomialReduce_UsesTheBroadcastTree(t *testing.T) {
	ms := members(13)
	b, _ := BinomialBroadcast(ms, ms[4])
	r, _ := BinomialReduce(ms, ms[4])
	edges := func(s Schedule, op Op) [][2]int {
		var e [][2]int
		for i, steps := range s.Steps {
			for _, st := range steps {
				if st.Op == op {
					e = append(e, [2]int{s.Ranks[i], st.Peer})
				}
			}
		}
		slices.SortFunc(e, func(a, b [2]int) int { return a[0]*1000 + a[1] - b[0]*1000 - b[1] })
		return e
	}
	if !slices.Equal(edges(b, Send), edges(r, Recv)) {
		t.Fatalf("broadcast parent→child %v, reduce parent←child %v", edges(b, Send), edges(r, Recv))
	}
}

func TestRecursiveDoubling_EveryoneGetsTheSum(t *testing.T) {
	for n := 1; n <= 40; n++ {
		s, err := RecursiveDoubling(members(n))
		if err != nil {
			t.Fatal(err)
		}
		p, logp := 1, 0
		for p*2 <= n {
			p, logp = p*2, logp+1
		}
		want := logp
		if p != n {
			want += 2
		}
		if s.Rounds != want {
			t.Fatalf("n=%d: %d rounds, want %d", n, s.Rounds, want)
		}
		for m, v := range runSchedule(t, s) {
			if !slices.Equal(v, ones(n)) {
				t.Fatalf("n=%d: rank %d ends with %v", n, m, v)
			}
		}
	}
}

func TestSchedule_ForAndErrors(t *testing.T) {
	s, err := BinomialBroadcast([]int{5, 9, 2}, 9)
	if err != nil {
		t.Fatal(err)
	}
	steps, ok := s.For(9)
	if !ok || len(steps) != 2 || steps[0] != (Step{Round: 0, Op: Send, Peer: 2}) || steps[1] != (Step{Round: 1, Op: Send, Peer: 5}) {
		t.Fatalf("root steps %+v", steps)
	}
	if _, ok := s.For(4); ok {
		t.Fatal("non-member has steps")
	}
	if Send.String() != "send" || Recv.String() != "recv" {
		t.Fatal("Op names")
	}
	for name, err := range map[string]error{
		"no members":      func() error { _, err := RecursiveDoubling(nil); return err }(),
		"duplicate":       func() error { _, err := RecursiveDoubling([]int{1, 1}); return err }(),
		"root not member": func() error { _, err := BinomialBroadcast([]int{1, 2}, 3); return err }(),
		"negative":        func() error { _, err := BinomialReduce([]int{-1, 2}, 2); return err }(),
	} {
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
		}
	}
}

func TestOrderByLatency(t *testing.T) {
	lat := NewMatrix(5)
	lat[0][1], lat[0][2], lat[0][3] = 3e-3, 1e-3, 1e-3 // 4 unmeasured
	got := OrderByLatency(0, []int{4, 1, 0, 3, 2, 3}, lat)
	if want := []int{0, 2, 3, 1, 4}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
