package straggler

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestNodeScripts runs the Node protocol scripts of testdata/node/*.txt in
// etcd raft's interaction-test manner: one Node per rank, the messages
// between them held in per-link queues the script delivers one command at
// a time, every output (Ready, what an Advance returned, what a message
// meant) printed in a stable text form. Regenerate the expected output
// with
//
//	go test ./straggler -run TestNodeScripts -rewrite
//
// and read the diff: every change is a change of the protocol.
//
// Commands:
//
//	new ranks=N batch=M [preset=NAME [stale-evict]]
//	    one Node per rank, each over its own Policy (preset), or, without
//	    a preset, over fixed plans: the input lists one per step from step
//	    0 ("ring", "evict C>P[!] ...", "exclude C>P ..."; ! is a Must edge).
//	ready [rank=R,...] [busy=C,...]
//	    each rank's Ready (default every rank); its state posts go on the
//	    link to their child, except one without Wait to a busy child (it is
//	    then unsent: the next advance reports it).
//	post rank=C [marker]
//	    a child posts the gradient its last Ready described (AdvanceChild),
//	    or its marker.
//	deliver from=A to=B [n=K]
//	    the messages queued on the link A→B (the first K): to a member,
//	    gradients are folded into its step's report, markers noted; to a
//	    child, reports are replayed and states adopted.
//	drain rank=P
//	    P folds the gradients queued from the ranks its Ready said to drain,
//	    up to their markers.
//	advance [rank=R,...] [step=N] [per-sample-ms=t0,...] [late-ms=l0,...]
//	    the members (default every rank that is not a child) advance with
//	    the step's reduced report: their plan's shares at t_r per sample
//	    (default 1 ms), arriving l_r later, and the gradients folded since
//	    the last advance; step overrides the report's step. Each parent's
//	    report goes on the link to each child it forwards to.
//	replay rank=C step=N
//	    C replays a report of step N (none queued: out of band).
//	adopt rank=C version=V [flags=full,rejoin,final]
//	    C adopts a state out of band.
//	rejoin rank=C [version=V]
//	    C checks it rejoined (default: the version of its last rejoin state).
//	flush [rank=R,...]
//	    each rank's final Ready; a member's final states go on the links.
//	nodes
//	    each rank's role, next step, parent and plan.
func TestNodeScripts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "node"), func(t *testing.T, path string) {
		h := &nodeHarness{}
		datadriven.RunTest(t, path, h.do)
	})
}

// nodeMsg is one message on a link between ranks.
type nodeMsg struct {
	kind    string // "gradient", "marker", "state", "report"
	version int    // a gradient's or a state's version
	samples int    // a gradient's samples
	flags   StateFlags
	rep     Report
}

func (m nodeMsg) String() string {
	switch m.kind {
	case "gradient":
		return fmt.Sprintf("gradient v=%d samples=%d", m.version, m.samples)
	case "state":
		return fmt.Sprintf("state v=%d%s", m.version, flagsString(m.flags))
	case "report":
		return fmt.Sprintf("report of step %d", m.rep.Step)
	}
	return m.kind
}

// nodeHarness is one script's ranks and links.
type nodeHarness struct {
	nodes  []*Node
	batch  int
	links  map[[2]int][]nodeMsg
	child  []ChildReport // gradients folded since the last advance, by child
	unsent map[int][]int // a member's children whose state a busy link skipped
	drain  map[int][]int // ranks a member's Ready or Flush said to drain
	last   map[int]Ready // each rank's last Ready
	rejoin map[int]int   // a child's last rejoin version
}

func (h *nodeHarness) do(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "new" && h.nodes == nil {
		d.Fatalf(t, "new first")
	}
	var b strings.Builder
	switch d.Cmd {
	case "new":
		h.new(t, d, &b)
	case "ready":
		busy := h.ranks(t, d, "busy", nil)
		for _, r := range h.ranks(t, d, "rank", h.all()) {
			rd := h.nodes[r].Ready()
			h.last[r] = rd
			describeReady(&b, r, rd)
			h.send(&b, r, rd, busy)
		}
	case "flush":
		for _, r := range h.ranks(t, d, "rank", h.all()) {
			rd := h.nodes[r].Flush()
			h.last[r] = rd
			fmt.Fprintf(&b, "flush ")
			describeReady(&b, r, rd)
			h.send(&b, r, rd, nil)
		}
	case "post":
		h.post(t, d, &b)
	case "deliver":
		h.deliver(t, d, &b)
	case "drain":
		var p int
		d.ScanArgs(t, "rank", &p)
		if len(h.drain[p]) == 0 {
			fmt.Fprintf(&b, "rank %d: nothing to drain\n", p)
		}
		h.drain[p] = slices.DeleteFunc(h.drain[p], func(c int) bool { return h.drainFrom(&b, c, p) })
	case "advance":
		h.advance(t, d, &b)
	case "replay":
		var c, step int
		d.ScanArgs(t, "rank", &c)
		d.ScanArgs(t, "step", &step)
		rep := h.report(h.nodes[c].Plan(), nil, nil)
		rep.Step = step
		fmt.Fprintf(&b, "rank %d replays step %d: %s\n", c, step, errString(h.nodes[c].Replay(rep)))
	case "adopt":
		var c, v int
		d.ScanArgs(t, "rank", &c)
		d.ScanArgs(t, "version", &v)
		var flags StateFlags
		if d.HasArg("flags") {
			flags = parseFlags(t, d)
		}
		fmt.Fprintf(&b, "rank %d adopts state v=%d%s: %s\n", c, v, flagsString(flags), h.adopt(c, v, flags))
	case "rejoin":
		var c int
		d.ScanArgs(t, "rank", &c)
		v := h.rejoin[c]
		d.MaybeScanArgs(t, "version", &v)
		fmt.Fprintf(&b, "rank %d rejoined at step %d: %s\n", c, v, errString(h.nodes[c].Rejoined(v)))
	case "nodes":
		for r, nd := range h.nodes {
			fmt.Fprintf(&b, "rank %d: %s next=%d parent=%d", r, nd.Role(), nd.Next(), nd.Parent())
			if nd.Done() {
				b.WriteString(" done")
			}
			if nd.Role() == RoleChild && nd.Marker() {
				b.WriteString(" marker")
			}
			fmt.Fprintf(&b, " | %s\n", nd.Plan())
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return b.String()
}

func (h *nodeHarness) new(t *testing.T, d *datadriven.TestData, b *strings.Builder) {
	var n int
	d.ScanArgs(t, "ranks", &n)
	d.ScanArgs(t, "batch", &h.batch)
	h.nodes, h.child = make([]*Node, n), make([]ChildReport, n)
	h.links, h.unsent, h.drain, h.last, h.rejoin = map[[2]int][]nodeMsg{}, map[int][]int{}, map[int][]int{}, map[int]Ready{}, map[int]int{}
	var plans []Plan
	if !d.HasArg("preset") {
		for s, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			plans = append(plans, parsePlan(t, d, s, n, h.batch, line))
		}
	}
	for r := range h.nodes {
		var dec Decider
		if d.HasArg("preset") {
			var name string
			d.ScanArgs(t, "preset", &name)
			cfg, err := Preset(name, n, h.batch)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			if d.HasArg("stale-evict") {
				cfg.Evict, cfg.Exclude = true, false
			}
			p, err := NewPolicy(cfg)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			dec = p
		} else {
			dec = &plannedDecider{cfg: Config{World: n, GlobalBatch: h.batch}, plans: plans}
		}
		nd, err := NewNode(r, dec)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		h.nodes[r] = nd
	}
	fmt.Fprintf(b, "%d ranks | %s\n", n, h.nodes[0].Plan())
}

// parsePlan reads one plan line of a planned script.
func parsePlan(t *testing.T, d *datadriven.TestData, step, n, batch int, line string) Plan {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] == "ring" {
		return ringPlan(step, n, batch)
	}
	mode := map[string]Mode{"evict": ModeEvict, "exclude": ModeExclude}[f[0]]
	if mode == ModeRing {
		d.Fatalf(t, "plan %q: want ring, evict or exclude", line)
	}
	var edges []Edge
	for _, e := range f[1:] {
		must := strings.HasSuffix(e, "!")
		c, p, ok := strings.Cut(strings.TrimSuffix(e, "!"), ">")
		ci, err1 := strconv.Atoi(c)
		pi, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil {
			d.Fatalf(t, "plan %q: edge %q, want C>P", line, e)
		}
		edges = append(edges, Edge{Child: ci, Parent: pi, Must: must})
	}
	slices.SortFunc(edges, func(a, b Edge) int { return a.Child - b.Child })
	return evictPlan(step, n, batch, mode, edges...)
}

// all is every rank.
func (h *nodeHarness) all() []int {
	r := make([]int, len(h.nodes))
	for i := range r {
		r[i] = i
	}
	return r
}

// ranks reads a comma-separated list of ranks (key=0,2 or key=(0,2)).
func (h *nodeHarness) ranks(t *testing.T, d *datadriven.TestData, key string, def []int) []int {
	arg, ok := d.Arg(key)
	if !ok {
		return def
	}
	var out []int
	for _, v := range arg.Vals {
		for _, s := range strings.Split(v, ",") {
			r, err := strconv.Atoi(s)
			if err != nil || r < 0 || r >= len(h.nodes) {
				d.Fatalf(t, "%s=%q: not a rank", key, s)
			}
			out = append(out, r)
		}
	}
	return out
}

// send puts a member's state posts on their links and notes its drains.
func (h *nodeHarness) send(b *strings.Builder, r int, rd Ready, busy []int) {
	for _, sp := range rd.States {
		if !sp.Wait && slices.Contains(busy, sp.To) {
			fmt.Fprintf(b, "  link %d→%d busy: state v=%d unsent\n", r, sp.To, sp.Version)
			h.unsent[r] = append(h.unsent[r], sp.To)
			continue
		}
		h.links[[2]int{r, sp.To}] = append(h.links[[2]int{r, sp.To}], nodeMsg{kind: "state", version: sp.Version, flags: sp.Flags})
	}
	if len(rd.Drain) > 0 {
		h.drain[r] = append(h.drain[r], rd.Drain...)
	}
}

func (h *nodeHarness) post(t *testing.T, d *datadriven.TestData, b *strings.Builder) {
	var c int
	d.ScanArgs(t, "rank", &c)
	nd := h.nodes[c]
	parent := nd.Parent()
	if d.HasArg("marker") {
		if !nd.Marker() {
			fmt.Fprintf(b, "rank %d: no marker due\n", c)
			return
		}
		h.links[[2]int{c, parent}] = append(h.links[[2]int{c, parent}], nodeMsg{kind: "marker"})
		fmt.Fprintf(b, "rank %d → %d: marker\n", c, parent)
		return
	}
	rd, ok := h.last[c]
	if !ok || rd.Role != RoleChild || rd.Idle {
		fmt.Fprintf(b, "rank %d: no gradient to post (its last Ready is not a computing child's)\n", c)
		return
	}
	nd.AdvanceChild()
	m := nodeMsg{kind: "gradient", version: rd.Step, samples: rd.Share}
	h.links[[2]int{c, rd.Parent}] = append(h.links[[2]int{c, rd.Parent}], m)
	fmt.Fprintf(b, "rank %d → %d: %s\n", c, rd.Parent, m)
}

func (h *nodeHarness) deliver(t *testing.T, d *datadriven.TestData, b *strings.Builder) {
	var from, to int
	d.ScanArgs(t, "from", &from)
	d.ScanArgs(t, "to", &to)
	link := [2]int{from, to}
	q := h.links[link]
	k := len(q)
	d.MaybeScanArgs(t, "n", &k)
	k = min(k, len(q))
	if k == 0 {
		fmt.Fprintf(b, "link %d→%d: empty\n", from, to)
	}
	for _, m := range q[:k] {
		fmt.Fprintf(b, "%d→%d %s: ", from, to, m)
		switch m.kind {
		case "gradient":
			h.fold(from, m)
			b.WriteString("folded\n")
		case "marker":
			b.WriteString("noted\n")
		case "report":
			b.WriteString(errString(h.nodes[to].Replay(m.rep)) + "\n")
		case "state":
			b.WriteString(h.adopt(to, m.version, m.flags) + "\n")
		}
	}
	h.links[link] = q[k:]
}

// fold adds a child's gradient to the step's report.
func (h *nodeHarness) fold(c int, m nodeMsg) {
	cr := &h.child[c]
	cr.Count++
	cr.Samples += m.samples
	cr.Compute += time.Duration(m.samples) * time.Millisecond
	cr.Cycle += time.Duration(m.samples) * time.Millisecond
	cr.Versions += m.version
}

// drainFrom folds what c queued for p up to its marker, and reports
// whether the marker came.
func (h *nodeHarness) drainFrom(b *strings.Builder, c, p int) bool {
	link := [2]int{c, p}
	q := h.links[link]
	folded := 0
	for i, m := range q {
		switch m.kind {
		case "gradient":
			h.fold(c, m)
			folded++
		case "marker":
			h.links[link] = q[i+1:]
			fmt.Fprintf(b, "rank %d drains rank %d: folds %d gradient(s), then its marker: done\n", p, c, folded)
			return true
		}
	}
	h.links[link] = nil
	fmt.Fprintf(b, "rank %d drains rank %d: folds %d gradient(s), no marker yet (the driver waits for it)\n", p, c, folded)
	return false
}

// report is the reduced report of plan's step: its members' shares at
// tau per sample arriving extra later, and the gradients folded.
func (h *nodeHarness) report(plan Plan, tau, extra []time.Duration) Report {
	n := len(h.nodes)
	if tau == nil {
		tau = make([]time.Duration, n)
		for r := range tau {
			tau[r] = time.Millisecond
		}
	}
	rep := report(plan, tau, extra)
	for c, cr := range h.child {
		rep.Child[c] = cr
		rep.Applied += cr.Samples
	}
	return rep
}

func (h *nodeHarness) advance(t *testing.T, d *datadriven.TestData, b *strings.Builder) {
	var members []int
	for r, nd := range h.nodes {
		if nd.Role() != RoleChild {
			members = append(members, r)
		}
	}
	members = h.ranks(t, d, "rank", members)
	if len(members) == 0 {
		d.Fatalf(t, "no member to advance")
	}
	ms := func(key string) []time.Duration {
		arg, ok := d.Arg(key)
		if !ok {
			return nil
		}
		var out []time.Duration
		for _, v := range arg.Vals {
			for _, s := range strings.Split(v, ",") {
				f, err := strconv.ParseFloat(s, 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", key, err)
				}
				out = append(out, time.Duration(f*float64(time.Millisecond)))
			}
		}
		if len(out) != len(h.nodes) {
			d.Fatalf(t, "%s: %d values for %d ranks", key, len(out), len(h.nodes))
		}
		return out
	}
	rep := h.report(h.nodes[members[0]].Plan(), ms("per-sample-ms"), ms("late-ms"))
	d.MaybeScanArgs(t, "step", &rep.Step)
	count, stale := rep.Folded()
	fmt.Fprintf(b, "report of step %d: %d samples applied, %d child gradients (staleness %.2f)\n", rep.Step, rep.Applied, count, stale)
	for _, r := range members {
		res, err := h.nodes[r].AdvanceMember(MemberOutcome{Report: rep, Unsent: h.unsent[r]})
		if err != nil {
			fmt.Fprintf(b, "rank %d: %s\n", r, errString(err))
			continue
		}
		delete(h.unsent, r)
		fmt.Fprintf(b, "rank %d: next %s", r, res.Next)
		if res.Evicted {
			b.WriteString(" | evicted")
		}
		for _, c := range res.Forward {
			fmt.Fprintf(b, " | forward to %d", c)
			h.links[[2]int{r, c}] = append(h.links[[2]int{r, c}], nodeMsg{kind: "report", rep: rep})
		}
		b.WriteString("\n")
	}
	clear(h.child)
}

// adopt feeds a state to child c and says what it meant.
func (h *nodeHarness) adopt(c, version int, flags StateFlags) string {
	a := h.nodes[c].Adopt(version, flags)
	if !a.Take {
		return fmt.Sprintf("ignored (holds v=%d)", h.nodes[c].Next())
	}
	out := "taken"
	for _, f := range []struct {
		on   bool
		name string
	}{{a.Full, "full"}, {a.Done, "done"}, {a.Rejoin, "rejoin"}} {
		if f.on {
			out += " " + f.name
		}
	}
	if a.Rejoin {
		h.rejoin[c] = version
	}
	return out
}

// describeReady prints a Ready in one line (and one per post or drain).
func describeReady(b *strings.Builder, r int, rd Ready) {
	if rd.Role == RoleChild {
		fmt.Fprintf(b, "rank %d: child v=%d share=%d parent=%d", r, rd.Step, rd.Share, rd.Parent)
		if rd.Await {
			b.WriteString(" await")
		}
		if rd.Idle {
			b.WriteString(" idle")
		}
		b.WriteString("\n")
		return
	}
	c := rd.Call
	fmt.Fprintf(b, "rank %d: %s step=%d share=%d call=%s", r, rd.Role, rd.Step, rd.Share, c.Kind)
	if c.Members != nil {
		fmt.Fprintf(b, " members=%v", c.Members)
	}
	for _, e := range c.Edges {
		fmt.Fprintf(b, " %d>%d", e.Child, e.Parent)
		if e.Must {
			b.WriteString("!")
		}
	}
	if c.WaitUntil > 0 {
		fmt.Fprintf(b, " wait-until=%v", c.WaitUntil)
	}
	if c.Late >= 0 {
		fmt.Fprintf(b, " late=%d", c.Late)
	}
	b.WriteString("\n")
	for _, sp := range rd.States {
		fmt.Fprintf(b, "  post state v=%d%s to %d", sp.Version, flagsString(sp.Flags), sp.To)
		if sp.Wait {
			b.WriteString(" wait")
		}
		b.WriteString("\n")
	}
	if len(rd.Drain) > 0 {
		fmt.Fprintf(b, "  drain %v\n", rd.Drain)
	}
}

func flagsString(f StateFlags) string {
	var s []string
	for _, x := range []struct {
		f    StateFlags
		name string
	}{{StateFull, "full"}, {StateRejoin, "rejoin"}, {StateFinal, "final"}} {
		if f&x.f != 0 {
			s = append(s, x.name)
		}
	}
	if len(s) == 0 {
		return ""
	}
	return " [" + strings.Join(s, ",") + "]"
}

func parseFlags(t *testing.T, d *datadriven.TestData) StateFlags {
	arg, _ := d.Arg("flags")
	var f StateFlags
	for _, v := range arg.Vals {
		for _, s := range strings.Split(v, ",") {
			switch s {
			case "full":
				f |= StateFull
			case "rejoin":
				f |= StateRejoin
			case "final":
				f |= StateFinal
			case "none":
			default:
				d.Fatalf(t, "flag %q: want full, rejoin, final or none", s)
			}
		}
	}
	return f
}

// errString prints an error (or ok), saying when it is ErrOutOfOrder.
func errString(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrOutOfOrder):
		return "error (out of order): " + err.Error()
	}
	return "error: " + err.Error()
}
