package flight

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is what Analyze found in one job's dumps.
type Report struct {
	Job        string `json:"job"`
	Generation uint64 `json:"generation"`
	World      int    `json:"world"`
	// Lines tell the story, most important first.
	Lines []string `json:"lines"`
	// Culprits are the ranks the story blames (the rank that stopped
	// calling, the ranks whose call differs from the others', the rank
	// every failure names), ascending; empty when it blames none.
	Culprits []int `json:"culprits"`
}

// Write prints the report, one line each, under a heading naming the job.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "job %s generation %d, %d ranks:\n", r.Job, r.Generation, r.World)
	for _, l := range r.Lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// AnalyzeAll groups dumps by job and generation and analyzes each group.
func AnalyzeAll(dumps []*Dump) []Report {
	type key struct {
		job string
		gen uint64
	}
	var order []key
	groups := map[key][]*Dump{}
	for _, d := range dumps {
		k := key{d.Job, d.Generation}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], d)
	}
	out := make([]Report, 0, len(order))
	for _, k := range order {
		out = append(out, Analyze(groups[k]))
	}
	return out
}

// rankView is one rank's calls of one group.
type rankView struct {
	rank    int
	dump    *Dump
	byCall  map[uint64]*Entry
	done    uint64 // the highest call completed
	cur     *Entry // the call after done, running or failed (nil: none)
	reached uint64 // done, or cur's number
}

// Analyze reads the dumps of one job generation (one per rank; ranks
// without one are named) and tells the story: the first call where ranks
// disagree, else the ranks that stopped calling while the others waited,
// else where every rank failed and whom the failure blames.
func Analyze(dumps []*Dump) Report {
	var rep Report
	if len(dumps) == 0 {
		rep.Lines = []string{"no dumps"}
		return rep
	}
	byRank := map[int]*Dump{}
	for _, d := range dumps {
		if old := byRank[d.Rank]; old == nil || d.Time.After(old.Time) {
			byRank[d.Rank] = d
		}
		rep.World = max(rep.World, d.World)
	}
	rep.Job, rep.Generation = dumps[0].Job, dumps[0].Generation
	var missing, partial []int
	for r := 0; r < rep.World; r++ {
		d := byRank[r]
		switch {
		case d == nil:
			missing = append(missing, r)
		case d.Partial:
			partial = append(partial, r)
		}
	}
	culprits := map[int]bool{}
	fail, failRanks := consensus(byRank)

	story := false
	for _, g := range groupsOf(byRank) {
		views := viewsOf(byRank, g)
		if lines, blamed := disagreement(views); lines != nil {
			rep.Lines = append(rep.Lines, lines...)
			for _, b := range blamed {
				culprits[b] = true
			}
			story = true
			break
		}
		// A rank behind the others is the story of a job that timed
		// out waiting (or of a live one); when a peer died, went silent
		// or sent garbage, the failure is, and ranks that were between
		// calls then were merely not there yet.
		if fail != nil && fail.Kind != "timeout" && fail.Kind != "canceled" {
			continue
		}
		if lines, blamed := laggards(views, g, missing); lines != nil {
			rep.Lines = append(rep.Lines, lines...)
			for _, b := range blamed {
				culprits[b] = true
			}
			story = true
			break
		}
	}
	if len(missing) > 0 {
		rep.Lines = append(rep.Lines, fmt.Sprintf("%s left no dump (killed, frozen, or never failed)", RanksText(missing)))
	}
	if fail != nil {
		line := fmt.Sprintf("failure (%s): %s", RanksText(failRanks), fail.Kind)
		if fail.Rank >= 0 {
			line += fmt.Sprintf(" blaming rank %d", fail.Rank)
			if !story {
				culprits[fail.Rank] = true
			}
		}
		if fail.Reporter >= 0 && fail.Reporter != fail.Rank {
			line += fmt.Sprintf(", reported by rank %d", fail.Reporter)
		}
		if fail.Detail != "" {
			line += ": " + fail.Detail
		}
		if in, e := failedIn(byRank, failRanks); e != nil {
			line += fmt.Sprintf("; %s failed in %s", RanksText(in), e.Describe())
		}
		rep.Lines = append(rep.Lines, line)
	} else if !story {
		rep.Lines = append(rep.Lines, progressLine(byRank))
	}
	if len(partial) > 0 {
		rep.Lines = append(rep.Lines, fmt.Sprintf("%s: partial dump (a call was running that the dump could not wait for)", RanksText(partial)))
	}
	for r := range culprits {
		rep.Culprits = append(rep.Culprits, r)
	}
	sort.Ints(rep.Culprits)
	return rep
}

// kindIntegrity is the failure kind of a frame that failed its integrity
// check (transport.KindIntegrity's name).
const kindIntegrity = "frame integrity"

// consensus returns the failure most dumps report (by kind and blamed
// rank), or the lowest rank's integrity failure where one was caught, and
// the ranks reporting a failure.
func consensus(byRank map[int]*Dump) (*Failure, []int) {
	type key struct {
		kind string
		rank int
	}
	count := map[key]int{}
	first := map[key]*Failure{}
	var ranks []int
	for r := range byRank {
		if byRank[r].Failure != nil {
			ranks = append(ranks, r)
		}
	}
	sort.Ints(ranks) // the lowest rank's words, so the story is the same from run to run
	for _, r := range ranks {
		f := byRank[r].Failure
		k := key{f.Kind, f.Rank}
		count[k]++
		if first[k] == nil {
			first[k] = f
		}
	}
	if len(ranks) == 0 {
		return nil, nil
	}
	// A frame that failed its integrity check is the cause wherever it
	// was caught: the rank that caught it fails and leaves, and the others
	// may report its leaving (a peer that died) before its abort reaches
	// them, outnumbering it.
	for _, r := range ranks {
		if f := byRank[r].Failure; f.Kind == kindIntegrity {
			return f, ranks
		}
	}
	var best key
	for k, n := range count {
		if n > count[best] || n == count[best] && (k.rank < best.rank || k.rank == best.rank && k.kind < best.kind) {
			best = k
		}
	}
	return first[best], ranks
}

// failedIn returns the ranks whose last call of the application failed,
// and the lowest such rank's call.
func failedIn(byRank map[int]*Dump, ranks []int) ([]int, *Entry) {
	var in []int
	var first *Entry
	for _, r := range ranks {
		es := byRank[r].Entries
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].Purpose != "" && es[i].State != Failed.String() {
				continue
			}
			if es[i].State == Failed.String() {
				in = append(in, r)
				if first == nil {
					first = &es[i]
				}
			}
			break
		}
	}
	return in, first
}

// groupsOf lists the groups the dumps mention, the world first.
func groupsOf(byRank map[int]*Dump) []string {
	seen := map[string]bool{"world": true}
	out := []string{"world"}
	var others []string
	for _, d := range byRank {
		for _, e := range d.Entries {
			if !seen[e.Group] {
				seen[e.Group] = true
				others = append(others, e.Group)
			}
		}
	}
	sort.Strings(others)
	return append(out, others...)
}

// viewsOf builds each rank's view of group g (ranks with no entry of a
// group other than the world are not its members, as far as the dumps
// tell).
func viewsOf(byRank map[int]*Dump, g string) []*rankView {
	var out []*rankView
	ranks := make([]int, 0, len(byRank))
	for r := range byRank {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	for _, r := range ranks {
		d := byRank[r]
		v := &rankView{rank: r, dump: d, byCall: map[uint64]*Entry{}}
		for i := range d.Entries {
			e := &d.Entries[i]
			if e.Group != g {
				continue
			}
			v.byCall[e.Call] = e
			if e.State == Done.String() && e.Call > v.done {
				v.done = e.Call
			}
		}
		if len(v.byCall) == 0 && g != "world" {
			continue
		}
		if e := v.byCall[v.done+1]; e != nil && (e.State == Running.String() || e.State == Failed.String()) {
			v.cur = e
		}
		v.reached = v.done
		if v.cur != nil {
			v.reached = v.cur.Call
		}
		out = append(out, v)
	}
	return out
}

// disagreement finds the first call number at which ranks recorded
// different calls and describes it, blaming the ranks outside the largest
// group of alike calls (every rank when no group is largest).
func disagreement(views []*rankView) ([]string, []int) {
	calls := map[uint64]bool{}
	for _, v := range views {
		for c := range v.byCall {
			calls[c] = true
		}
	}
	nums := make([]uint64, 0, len(calls))
	for c := range calls {
		nums = append(nums, c)
	}
	slices.Sort(nums)
	for _, c := range nums {
		type variant struct {
			e     *Entry
			ranks []int
		}
		var vs []*variant
		for _, v := range views {
			e := v.byCall[c]
			if e == nil {
				continue
			}
			found := false
			for _, x := range vs {
				if x.e.shape() == e.shape() {
					x.ranks = append(x.ranks, v.rank)
					found = true
					break
				}
			}
			if !found {
				vs = append(vs, &variant{e: e, ranks: []int{v.rank}})
			}
		}
		if len(vs) < 2 {
			continue
		}
		sort.SliceStable(vs, func(i, j int) bool {
			a, b := vs[i], vs[j]
			if len(a.ranks) != len(b.ranks) {
				return len(a.ranks) > len(b.ranks)
			}
			return a.ranks[0] < b.ranks[0]
		})
		// The largest group of alike calls is the norm, and the others
		// are to blame; with no largest group (two ranks, say), nothing
		// tells which call was meant, and every variant is.
		tie := len(vs[0].ranks) == len(vs[1].ranks)
		head := fmt.Sprintf("ranks disagree at call #%d of group %s (the first call where they do):", c, vs[0].e.Group)
		if tie {
			head = fmt.Sprintf("ranks disagree at call #%d of group %s (the first call where they do; no majority tells which call was meant):", c, vs[0].e.Group)
		}
		lines := []string{head}
		var blamed []int
		for i, x := range vs {
			lines = append(lines, fmt.Sprintf("  %s called %s", RanksText(x.ranks), callText(x.e)))
			if i > 0 || tie {
				blamed = append(blamed, x.ranks...)
			}
		}
		sort.Ints(blamed)
		return lines, blamed
	}
	return nil, nil
}

// callText describes a call with what tells alike calls apart: its step
// label and its call site, when recorded.
func callText(e *Entry) string {
	s := e.Describe()
	if e.Step != 0 && e.Collective != "PointToPoint" && e.Collective != "Eager" {
		s += fmt.Sprintf(" at step %d", e.Step)
	}
	if e.Site != "" {
		s += " from " + e.Site
	}
	if e.Purpose != "" {
		s += " (" + e.Purpose + ")"
	}
	return s
}

// laggards finds the ranks that entered fewer calls of group g than the
// others and describes who waited for them.
func laggards(views []*rankView, g string, missing []int) ([]string, []int) {
	if len(views) == 0 {
		return nil, nil
	}
	var most uint64
	for _, v := range views {
		most = max(most, v.reached)
	}
	var behind, ahead []*rankView
	for _, v := range views {
		if v.reached < most {
			behind = append(behind, v)
		} else {
			ahead = append(ahead, v)
		}
	}
	if len(behind) == 0 {
		return nil, nil
	}
	var lines []string
	var blamed []int
	// The ranks furthest behind are the story; ranks in between waited too.
	least := behind[0].reached
	for _, v := range behind {
		least = min(least, v.reached)
	}
	// A rank behind that failed in its call was itself waiting when the
	// job failed (the failure tells that story); a rank behind that is
	// between calls, or still in one, stopped.
	var stopped []*rankView
	for _, v := range behind {
		if v.reached == least && (v.cur == nil || v.cur.State == Running.String()) {
			stopped = append(stopped, v)
			blamed = append(blamed, v.rank)
		}
	}
	if len(stopped) == 0 {
		return nil, nil
	}
	ranks := func(vs []*rankView) []int {
		out := make([]int, len(vs))
		for i, v := range vs {
			out[i] = v.rank
		}
		return out
	}
	next := least + 1
	live := true
	for _, v := range views {
		live = live && v.dump.Failure == nil
	}
	never := "never called"
	if live {
		never = "has not called"
	}
	for _, v := range stopped {
		switch {
		case v.cur != nil:
			lines = append(lines, fmt.Sprintf("rank %d is in %s and %s #%d", v.rank, v.cur.Describe(), never, next))
		case v.done > 0:
			lines = append(lines, fmt.Sprintf("rank %d completed %s and %s #%d", v.rank, v.byCall[v.done].Describe(), never, next))
		default:
			lines = append(lines, fmt.Sprintf("rank %d %s #%d of group %s", v.rank, never, next, g))
		}
	}
	var waited []*rankView
	for _, v := range append(ahead, behind...) {
		if v.reached > least && v.cur != nil {
			waited = append(waited, v)
		}
	}
	sort.Slice(waited, func(i, j int) bool { return waited[i].rank < waited[j].rank })
	if len(waited) > 0 {
		var longest time.Duration
		for _, v := range waited {
			longest = max(longest, waitOf(v))
		}
		verb := "waited"
		if live {
			verb = "have been waiting"
		}
		line := fmt.Sprintf("%s %s in %s", RanksText(ranks(waited)), verb, waited[0].cur.Describe())
		if longest > 0 {
			line += fmt.Sprintf(" for %.1f s", longest.Seconds())
		}
		if peers := waitedOn(waited); len(peers) > 0 {
			line += fmt.Sprintf(" (waiting on %s)", RanksText(peers))
		}
		if len(lines) == 1 {
			lines[0] += "; " + line
		} else {
			lines = append(lines, line)
		}
	}
	return lines, blamed
}

// waitOf is how long a rank's current call lasted: to its end, or to the
// dump while it runs.
func waitOf(v *rankView) time.Duration {
	e := v.cur
	from := e.Start
	if e.WaitingSince != nil && (from.IsZero() || e.Approx) {
		from = *e.WaitingSince
	}
	to := v.dump.Time
	if e.End != nil {
		to = *e.End
	}
	if from.IsZero() || to.Before(from) {
		return 0
	}
	return to.Sub(from)
}

// waitedOn lists the peers the waiting calls recorded waiting on.
func waitedOn(vs []*rankView) []int {
	seen := map[int]bool{}
	var out []int
	for _, v := range vs {
		if p := v.cur.WaitingOn; p != nil && !seen[*p] {
			seen[*p] = true
			out = append(out, *p)
		}
	}
	sort.Ints(out)
	return out
}

// progressLine describes a job that has not failed: how far each rank
// got in the world group.
func progressLine(byRank map[int]*Dump) string {
	views := viewsOf(byRank, "world")
	var in []string
	var done uint64
	for _, v := range views {
		done = max(done, v.done)
		if v.cur != nil {
			in = append(in, fmt.Sprintf("rank %d in %s", v.rank, v.cur.Describe()))
		}
	}
	s := fmt.Sprintf("no failure; every rank has completed world call #%d", done)
	for _, v := range views {
		if v.done < done {
			s = fmt.Sprintf("no failure; ranks have completed up to world call #%d", done)
			break
		}
	}
	if len(in) > 0 {
		s += "; " + strings.Join(in, "; ")
	}
	return s
}
