package algo

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Kind names the program an AllReduce runs.
type Kind uint8

// Programs an AllReduce can run.
const (
	// KindDefault is the collective's own algorithm: for an AllReduce,
	// recursive doubling at or below SmallBytes, the ring above; for any
	// other collective its one algorithm.
	KindDefault Kind = iota
	// KindRing is the ring (ring.AllReduce).
	KindRing
	// KindPieces is the ring over pieces of Tunables.PieceBytes
	// (ring.AllReducePieces).
	KindPieces
	// KindTwoLevel is the two-level allreduce over Tunables.Hosts
	// (ring.AllReduceTwoLevel).
	KindTwoLevel
	// KindOffload is the ring with one rank's share offloaded
	// (ring.AllReduceOffload): Choice.Slow, in Choice.Rounds rounds.
	KindOffload
	// KindCPUGroups is the small-message allreduce of ranks grouped by
	// CPU (tree.AllReduceGroups over Tunables.CPUGroups).
	KindCPUGroups
)

var kindNames = [...]string{"default", "ring", "ring-pieces", "two-level", "ring-offload", "cpu-groups"}

// String returns the kind's name, the Algorithm of the program it builds.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind parses the name of a large AllReduce's program
// (Config.Program): "auto" or "" is KindDefault (the Planner chooses), the
// others the names String gives, ring to ring-offload.
func ParseKind(s string) (Kind, error) {
	if s == "" || s == "auto" {
		return KindDefault, nil
	}
	for k := KindRing; k <= KindOffload; k++ {
		if s == k.String() {
			return k, nil
		}
	}
	return 0, fmt.Errorf("algo: unknown program %q (want auto, ring, ring-pieces, two-level or ring-offload)", s)
}

// Choice is the program chosen for a call: its kind and, for an
// offload, its parameters, and its channels. It is comparable: the engine
// keys its cached programs on it.
type Choice struct {
	Kind   Kind
	Slow   int // KindOffload: the rank offloaded
	Rounds int // KindOffload: its rounds
	// Channels, when positive, is the program's channels (parallel
	// streams per link) instead of the configured Tunables.Channels
	// (a point-to-point message split over that many).
	Channels int
}

// String names the choice: its kind, with an offload's slow rank and the
// channels when chosen.
func (c Choice) String() string {
	s := c.Kind.String()
	if c.Kind == KindOffload {
		s = fmt.Sprintf("%v (rank %d offloaded, %d rounds)", c.Kind, c.Slow, c.Rounds)
	}
	if c.Channels > 0 {
		s += fmt.Sprintf(" ×%d streams", c.Channels)
	}
	return s
}

// Facts are what every rank of a communicator agreed on about how it
// runs: the transport (whether every link has a fastbox) and where the
// ranks are (hosts), and the link prices, measured or by default. Every
// rank holds the same Facts, so every rank's Planner decides alike.
type Facts struct {
	// World is the communicator's size.
	World int
	// Fast: every rank has fastboxes (shared memory) on all its links,
	// as all ranks agreed. Programs whose messages fit a fastbox then run
	// on the synchronous fastbox path.
	Fast bool
	// FastboxBytes is the largest message a fastbox carries.
	FastboxBytes int
	// Host[r] is rank r's host (nil: every rank on one host).
	Host []int
	// CPU[r] is the CPU rank r is bound to, −1 if it is not bound to one
	// (nil: not known).
	CPU []int
	// Net prices the links (zero fields: the defaults of DefaultNet).
	// Its Bandwidth and Latency are the measured matrices, if any.
	Net cost.Net
	// Measured says Net holds a probe's measurements.
	Measured bool
	// Streams is the number of links (connections) per pair of ranks
	// the transport opened: the most channels a program may use (0: as
	// many as Tunables.Channels). Across hosts it may exceed the
	// configured channels, so that where one stream cannot fill a link
	// (a long round trip) a program can use more (Measured's stream).
	Streams int
}

// DefaultNet is what the Planner assumes of links it has not measured:
// between hosts a 10 Gbit/s network at 50 µs a message; within a host,
// shared memory at 5 GB/s and 5 µs (the queued path). Only ratios
// matter to the choice: it ranks programs that move the same data over
// different links.
func DefaultNet() cost.Net {
	return cost.Net{Alpha: 50 * time.Microsecond, BytesPerSec: 1.25e9,
		Local: cost.Link{Alpha: 5 * time.Microsecond, BytesPerSec: 5e9}}
}

// Config is what a communicator's settings say about the choice.
type Config struct {
	Tunables Tunables
	// Pieces is how a large AllReduce on shared memory takes pieces:
	// "auto" (measured against the plain ring), "always" or "off".
	Pieces string
	// Program, when not KindDefault, is the program every large AllReduce
	// of the world runs where it applies (the ring where it does not).
	Program Kind
	// MaxRounds bounds an offload's rounds (0: 256).
	MaxRounds int
}

// Planner is the one place that decides how each call runs, like NCCL's
// getAlgoInfo: the agreed Facts and the Tuner's measurements go in, the
// program (its builder, and whether it runs on the fastbox path) comes
// out. Every call asks Decide; the engine runs what it says, times the
// calls it asks to time and runs the agreements it asks for; the executor
// follows the program's path. The candidates of a large AllReduce of the
// world are those the Facts allow (the ring; pieces on shared memory; the
// two-level allreduce across hosts of several ranks; the offload of a
// rank behind a slow link, once the links are measured), ordered by the
// cost model; where there are several, the Tuner measures them and keeps
// the fastest. It is pure and, like a Tuner, used by one goroutine.
type Planner struct {
	cfg     Config
	t       Tunables
	facts   Facts
	tuner   Tuner
	classes [64]planned // by size class of a large AllReduce of the world
	// probeDue asks for the links to be measured before the next large
	// AllReduce of the world (Decision.Probe): across hosts where an
	// offload could pay, at the first such call and after a drift.
	probeDue bool
}

// planned is the candidates of one size class, best priced first.
type planned struct {
	n      int // 0: not priced yet
	bytes  int // the size they were priced for
	choice [maxVariants]Choice
	price  [maxVariants]time.Duration
	why    string
}

// NewPlanner returns the decision point of a communicator with settings
// cfg and facts f.
func NewPlanner(cfg Config, f Facts) (*Planner, error) {
	switch cfg.Pieces {
	case "auto", "always", "off":
	case "":
		cfg.Pieces = "auto"
	default:
		return nil, fmt.Errorf("algo: pieces %q (want auto, always or off)", cfg.Pieces)
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = 256
	}
	def := DefaultNet()
	if f.Net.BytesPerSec == 0 {
		f.Net.Alpha, f.Net.BytesPerSec = def.Alpha, def.BytesPerSec
	}
	if f.Net.Local == (cost.Link{}) {
		f.Net.Local = def.Local
	}
	f.Net.Host = f.Host
	f.Net.Channels, f.Net.ChunkBytes = cfg.Tunables.Channels, cfg.Tunables.ChunkBytes
	if f.Streams < max(1, cfg.Tunables.Channels) {
		f.Streams = max(1, cfg.Tunables.Channels)
	}
	p := &Planner{cfg: cfg, t: cfg.Tunables, facts: f}
	p.t.Hosts = hostGroups(f.Host, p.t.Order)
	if f.Fast {
		p.t.CPUGroups = cpuGroups(f.CPU, p.order())
	}
	p.probeDue = p.probes() && !f.Measured
	return p, nil
}

// probes reports whether the links are worth measuring: across hosts,
// where a rank could be offloaded or a program could use more streams
// than one.
func (p *Planner) probes() bool {
	return p.canOffload() || p.facts.Host != nil && !p.facts.Fast && p.facts.Streams > max(1, p.t.Channels)
}

// hostGroups returns the ranks grouped by host (hosts in the order the
// ring reaches them, each host's ranks in ring order), or nil when they
// are on one host or the hosts hold different numbers of ranks.
func hostGroups(host, order []int) [][]int {
	if len(host) == 0 {
		return nil
	}
	if len(order) != len(host) {
		order = make([]int, len(host))
		for i := range order {
			order[i] = i
		}
	}
	groups := groupBy(host, order)
	for _, g := range groups {
		if len(g) != len(groups[0]) {
			return nil
		}
	}
	if len(groups) < 2 {
		return nil
	}
	return groups
}

// cpuGroups returns the ranks grouped by the CPU they are bound to (in
// ring order, each group led by its first rank), or nil when a rank is not
// bound to one CPU or no CPU runs three ranks: with two ranks per CPU
// recursive doubling's two rounds beat the groups' three hops (4 ranks on
// 2 CPUs under load: 34–42 µs against 50–69; 8 ranks: 86–93 against
// 77–84; measured for commit df6f391, its message has the runs).
func cpuGroups(cpu, order []int) [][]int {
	if len(cpu) != len(order) || len(cpu) == 0 || slices.Min(cpu) < 0 {
		return nil
	}
	groups := groupBy(cpu, order)
	if !slices.ContainsFunc(groups, func(g []int) bool { return len(g) > 2 }) {
		return nil
	}
	return groups
}

// groupBy groups the ranks of order by key[rank]: groups in order of
// their first rank, each group's ranks in order.
func groupBy(key, order []int) [][]int {
	var groups [][]int
	index := map[int]int{}
	for _, r := range order {
		g, ok := index[key[r]]
		if !ok {
			g = len(groups)
			index[key[r]] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], r)
	}
	return groups
}

// Facts returns the facts the Planner decides from.
func (p *Planner) Facts() Facts { return p.facts }

// Decision is the Planner's answer for one call.
type Decision struct {
	// Choice is the program to run.
	Choice Choice
	// Timed asks for the call's duration (Observe); Agree asks, after
	// the call, for the Max allreduce of Report over every rank, given
	// to Agreed (the Tuner's window ended).
	Timed, Agree bool
	// Probe asks the caller to measure the links between hosts (every
	// rank takes part), give the agreed matrices to Measured, and ask
	// again.
	Probe bool
}

// Tuned reports whether the Tuner chooses among candidates for the call.
func (d Decision) Tuned() bool { return d.Timed || d.Agree }

// Decide returns how the call s runs. It is on every call's path: a small
// call or one of another collective costs a few comparisons.
func (p *Planner) Decide(s *Spec) Decision {
	if s.Collective != wire.AllReduce {
		return Decision{}
	}
	if s.Small(p.t) {
		if p.t.CPUGroups != nil && s.Members == nil && s.Bytes() <= groupBytes {
			return Decision{Choice: Choice{Kind: KindCPUGroups}}
		}
		return Decision{}
	}
	b := s.Bytes()
	if s.Members != nil { // a subgroup's allreduce: the ring among its members
		if p.facts.Fast && p.cfg.Pieces == "always" && p.piecesPay(b) {
			return Decision{Choice: Choice{Kind: KindPieces}}
		}
		return Decision{}
	}
	if p.probeDue {
		return Decision{Probe: true}
	}
	if p.facts.Fast && !p.piecesPay(b) {
		return Decision{Choice: Choice{Kind: KindRing}} // one piece: nothing to choose
	}
	c := p.class(b)
	if c.n == 1 {
		return Decision{Choice: c.choice[0]}
	}
	st := p.tuner.Next(b)
	return Decision{Choice: c.choice[st.Variant], Timed: st.Timed, Agree: st.Agree}
}

// groupBytes bounds the allreduce grouped by CPU: a leader folds and
// sends its members' data one after the other, which pays only while
// scheduling, not bytes, is the cost.
const groupBytes = 1 << 10

// piecesPay reports whether an AllReduce of b bytes is larger than a
// piece.
func (p *Planner) piecesPay(b int) bool { return p.t.PieceBytes > 0 && b > p.t.PieceBytes }

// class returns the candidates of the size class of b bytes, pricing them
// on first use.
func (p *Planner) class(b int) *planned {
	c := &p.classes[bits.Len(uint(b))]
	if c.n == 0 {
		p.price(c, b)
		p.tuner.Reset(b, c.n)
	}
	return c
}

// Observe records the duration of a timed call of bytes bytes.
func (p *Planner) Observe(bytes int, d time.Duration) { p.tuner.Observe(bytes, d) }

// Report is this rank's mean time per byte over the window that ends with
// a call of bytes bytes: its part of the agreement.
func (p *Planner) Report(bytes int) float64 { return p.tuner.Report(bytes) }

// Agreed ends the window of a call of bytes bytes with the agreed time per
// byte; it reports whether the program in use for the size changed. A
// drift of the time in use where an offload could pay has the links
// measured again before the next call.
func (p *Planner) Agreed(bytes int, perByte float64) bool {
	changed := p.tuner.Agreed(bytes, perByte)
	if p.tuner.Drifted(bytes) && p.probes() {
		p.probeDue = true
	}
	return changed
}

// canOffload reports whether an offload is possible at all: ranks on
// three or more hosts, some host with one rank, no other program forced.
func (p *Planner) canOffload() bool {
	if p.facts.Fast || len(p.facts.Host) < 3 || p.cfg.Program != KindDefault && p.cfg.Program != KindOffload {
		return false
	}
	count := map[int]int{}
	for _, h := range p.facts.Host {
		count[h]++
	}
	if len(count) < 3 {
		return false
	}
	for _, c := range count {
		if c == 1 {
			return true
		}
	}
	return false
}

// Measured gives the Planner the agreed measurements of the links
// (bandwidth in bytes per second over all Streams at once, latency in
// seconds, rank by rank; 0: not measured) and what one stream carries
// (bytes per second; 0: as much as the link): the candidates of every
// size are priced again, and a size whose candidates changed is tuned
// afresh.
func (p *Planner) Measured(bandwidth, latency [][]float64, stream float64) {
	p.facts.Net.Bandwidth, p.facts.Net.Latency = bandwidth, latency
	p.facts.Net.StreamBytesPerSec = stream
	p.facts.Net.Host = p.facts.Host
	p.facts.Measured, p.probeDue = true, false
	for i := range p.classes {
		c := &p.classes[i]
		if c.n == 0 {
			continue
		}
		was := *c
		p.price(c, c.bytes)
		if c.n != was.n || c.choice != was.choice {
			p.tuner.Reset(c.bytes, c.n)
		}
	}
}

// price fills c with the candidates for an AllReduce of the world of b
// bytes, best priced first.
func (p *Planner) price(c *planned, b int) {
	*c = planned{bytes: b}
	add := func(ch Choice, t time.Duration) {
		if c.n < maxVariants {
			c.choice[c.n], c.price[c.n] = ch, t
			c.n++
		}
	}
	order := p.order()
	net := &p.facts.Net
	ring := net.RingOrder(order, b)
	switch {
	case p.cfg.Program != KindDefault:
		if ch, ok := p.forced(b); ok {
			add(ch, 0)
			c.why = "the program set by the configuration"
			return
		}
		add(Choice{Kind: KindRing}, ring)
		c.why = fmt.Sprintf("%v is set but does not apply", p.cfg.Program)
		return
	case p.facts.Fast:
		switch {
		case !p.piecesPay(b) || p.cfg.Pieces == "off":
			add(Choice{Kind: KindRing}, ring)
			c.why = "one host, no pieces at this size"
		case p.cfg.Pieces == "always":
			add(Choice{Kind: KindPieces}, net.Pieces(order, b, p.t.PieceBytes))
			c.why = "one host, pieces always"
		default:
			add(Choice{Kind: KindRing}, ring)
			add(Choice{Kind: KindPieces}, net.Pieces(order, b, p.t.PieceBytes))
			c.why = "one host: pieces against the ring, measured"
		}
		return
	}
	ringCh, ring := p.streams(func(n *cost.Net) time.Duration { return n.RingOrder(order, b) })
	add(Choice{Kind: KindRing, Channels: ringCh}, ring)
	if p.t.Hosts != nil && len(p.t.Hosts[0]) > 1 {
		ch, t := p.streams(func(n *cost.Net) time.Duration { return n.TwoLevel(p.t.Hosts, b) })
		add(Choice{Kind: KindTwoLevel, Channels: ch}, t)
	}
	if p.facts.Measured && p.canOffload() {
		if ch, t := p.bestOffload(order, b); t > 0 && t < ring {
			add(ch, t)
		}
	}
	type priced struct {
		ch Choice
		t  time.Duration
	}
	all := make([]priced, c.n)
	for i := range all {
		all[i] = priced{c.choice[i], c.price[i]}
	}
	slices.SortStableFunc(all, func(x, y priced) int { return cmp.Compare(x.t, y.t) })
	for i, x := range all {
		c.choice[i], c.price[i] = x.ch, x.t
	}
	var parts []string
	for i := range c.n {
		parts = append(parts, fmt.Sprintf("%v %v", c.choice[i], c.price[i].Round(time.Microsecond)))
	}
	c.why = "across hosts, priced " + strings.Join(parts, ", ")
	if c.n > 1 {
		c.why += "; measured"
	}
}

// streams returns the channels a program priced by price should use, and
// its price there: where one stream cannot fill a link (the probe measured
// Streams streams at once carrying more than one), the fewest of 2, 4, …
// up to Streams at which the model prices it within 5% of its best; 0
// (the configured channels) otherwise.
func (p *Planner) streams(price func(*cost.Net) time.Duration) (int, time.Duration) {
	n := p.facts.Net
	base := price(&n)
	if n.StreamBytesPerSec <= 0 || p.facts.Streams <= max(1, p.t.Channels) {
		return 0, base
	}
	best, at := base, 0
	var prices []time.Duration
	var counts []int
	for c := 2 * max(1, p.t.Channels); c <= p.facts.Streams; c *= 2 {
		n.Channels = c
		t := price(&n)
		prices, counts = append(prices, t), append(counts, c)
		if t < best {
			best = t
		}
	}
	if best == base {
		return 0, base
	}
	for i, t := range prices {
		if float64(t) <= 1.05*float64(best) {
			at, best = counts[i], t
			break
		}
	}
	return at, best
}

// ErrProgramCannotRun is wrapped by CheckProgram's error: the program the
// configuration sets (Config.Program) cannot run on these ranks at all.
var ErrProgramCannotRun = errors.New("the configured program cannot run on these ranks")

// CheckProgram reports, as an error wrapping ErrProgramCannotRun, a
// program set by the configuration that can never run on ranks with the
// Planner's facts, as NCCL refuses an NCCL_ALGO it cannot use:
// two-level without two or more hosts of as many ranks each,
// ring-offload without three or more hosts one of which holds one rank
// (across hosts, not on shared memory), ring-pieces with pieces off (a
// piece size of 0). It is nil for auto, for the ring, and for a program
// that runs at some sizes (ring-pieces runs the ring at one piece or
// less: SetProgramSkipped says when a call does).
func (p *Planner) CheckProgram() error {
	var need string
	switch p.cfg.Program {
	case KindTwoLevel:
		if p.t.Hosts == nil {
			need = "ranks on two or more hosts, as many on each"
		}
	case KindOffload:
		if !p.canOffload() {
			need = "ranks on three or more hosts, one of them alone on its host"
		}
	case KindPieces:
		if p.t.PieceBytes <= 0 {
			need = "pieces (a piece size above 0)"
		}
	}
	if need == "" {
		return nil
	}
	return fmt.Errorf("algo: %w: %v needs %s (%d ranks here); set the algorithm to auto or ring",
		ErrProgramCannotRun, p.cfg.Program, need, p.facts.World)
}

// SetProgramSkipped reports whether the configuration sets a program
// (Config.Program) and s, a large AllReduce of the world, runs choice c
// instead: a size the program does not apply to (Reason says why).
func (p *Planner) SetProgramSkipped(s *Spec, c Choice) bool {
	return p.cfg.Program != KindDefault && s.Collective == wire.AllReduce && s.Members == nil && !s.Small(p.t) &&
		c.Kind != p.cfg.Program
}

// forced returns the configured program for b bytes, if it applies.
func (p *Planner) forced(b int) (Choice, bool) {
	switch p.cfg.Program {
	case KindRing:
		return Choice{Kind: KindRing}, true
	case KindPieces:
		return Choice{Kind: KindPieces}, p.piecesPay(b)
	case KindTwoLevel:
		return Choice{Kind: KindTwoLevel}, p.t.Hosts != nil
	case KindOffload:
		if !p.facts.Measured {
			return Choice{}, false
		}
		ch, t := p.bestOffload(p.order(), b)
		return ch, t > 0
	}
	return Choice{}, false
}

// bestOffload returns the offload that prices lowest for b bytes: of a
// rank alone on its host (its links are its own), in the best number of
// rounds. Its price is 0 when none applies.
func (p *Planner) bestOffload(order []int, b int) (Choice, time.Duration) {
	count := map[int]int{}
	for _, h := range p.facts.Host {
		count[h]++
	}
	var best Choice
	var price time.Duration
	for _, r := range order {
		if count[p.facts.Host[r]] != 1 {
			continue
		}
		var rounds int
		ch, t := p.streams(func(n *cost.Net) time.Duration {
			var t time.Duration
			rounds, t = n.OffloadRounds(order, r, b, p.cfg.MaxRounds)
			return t
		})
		if ch > 0 { // priced again at the streams chosen: the rounds that go with them
			n := p.facts.Net
			n.Channels = ch
			rounds, t = n.OffloadRounds(order, r, b, p.cfg.MaxRounds)
		}
		if t > 0 && (price == 0 || t < price) {
			best, price = Choice{Kind: KindOffload, Slow: r, Rounds: rounds, Channels: ch}, t
		}
	}
	return best, price
}

// order is the world's ring.
func (p *Planner) order() []int {
	if len(p.t.Order) == p.facts.World {
		return p.t.Order
	}
	order := make([]int, p.facts.World)
	for i := range order {
		order[i] = i
	}
	return order
}

// Why says which program a large AllReduce of the world of bytes bytes
// runs now and why: its candidates, their prices and, where the Tuner
// chooses, what it measured.
func (p *Planner) Why(bytes int) string {
	c := &p.classes[bits.Len(uint(max(bytes, 0)))]
	if c.n == 0 {
		return "not decided yet"
	}
	if c.n == 1 {
		return fmt.Sprintf("%v: %s", c.choice[0], c.why)
	}
	best, perByte := p.tuner.Choice(bytes)
	var parts []string
	for i := range c.n {
		if perByte[i] > 0 {
			parts = append(parts, fmt.Sprintf("%v %.3g ns/B", c.choice[i].Kind, perByte[i]*1e9))
		}
	}
	return fmt.Sprintf("%v: %s (%s)", c.choice[best], c.why, strings.Join(parts, ", "))
}

// Reason says why a call s runs the program of choice c (the log's
// "why"): for a large AllReduce of the world what Why says, for the
// others the rule that chose.
func (p *Planner) Reason(s *Spec, c Choice) string {
	switch {
	case s.Collective != wire.AllReduce:
		return "the collective's algorithm"
	case c.Kind == KindCPUGroups:
		return fmt.Sprintf("%d B, ranks sharing CPUs (%d groups): fold within a CPU's ranks, one exchange between CPUs", s.Bytes(), len(p.t.CPUGroups))
	case s.Small(p.t):
		members := s.Members
		if members == nil {
			members = p.order()
		}
		return fmt.Sprintf("%d B at most the small-message threshold (%d B): latency-optimal (priced %v against the ring's %v)",
			s.Bytes(), p.t.SmallBytes, p.facts.Net.Doubling(members, s.Bytes()), p.facts.Net.RingOrder(members, s.Bytes()))
	case s.Members != nil && c.Kind == KindPieces:
		return fmt.Sprintf("among %d members, on shared memory, pieces always", len(s.Members))
	case s.Members != nil:
		return fmt.Sprintf("the ring among %d members", len(s.Members))
	case p.facts.Fast && !p.piecesPay(s.Bytes()):
		return fmt.Sprintf("one host, %d B at most one piece (%d B): the ring", s.Bytes(), p.t.PieceBytes)
	}
	return p.Why(s.Bytes())
}

// Program builds rank s.Rank's program for s (Rank and World filled in)
// with choice c, and marks its path: the fastbox path when every rank
// agreed on fastboxes, the program allows it (no eager messages, not
// marked General) and its largest message fits a fastbox.
func (p *Planner) Program(s Spec, c Choice) (*plan.Program, error) {
	prog, err := Build(s, p.t, c)
	if err != nil {
		return nil, err
	}
	if err := prog.Validate(); err != nil {
		return nil, err
	}
	prog.Fast = p.facts.Fast && !prog.General && !prog.HasEager() && prog.LargestMessage()*max(1, s.ElemSize) <= p.facts.FastboxBytes
	return prog, nil
}
