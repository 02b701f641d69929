package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/exec"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Call is one call as the root package validated it: what was called (the
// algorithm's Spec; its Rank and World are filled here), the arithmetic,
// and the buffers.
type Call struct {
	Spec  algo.Spec
	DType reduce.DType
	Op    reduce.Op
	Tag   uint32
	Data  []byte
	Input []byte
	// Deadline ends the waits of an AllReduceTree parent for its
	// children's contributions; Collected is set to how many it folded.
	Deadline  time.Time
	Collected int
	// Purpose says why the communicator makes the call itself (the flight
	// recorder shows it); empty for the application's calls.
	Purpose string
	// Site names the application's call site and SiteFP is its
	// fingerprint (RINGTAIL_DEBUG=detail: Settings.Detail); empty: none.
	Site   string
	SiteFP uint64
}

// group counts the calls of one group of ranks: the whole world, a member
// list (a subgroup's ring), or one direction of a point-to-point pair.
// Every member makes the same calls of a group in the same order, so the
// n-th call of a group is the same call on every member: its number
// travels in every frame (wire.Desc.Call).
type group struct {
	id   uint32
	done uint64    // calls completed
	last wire.Desc // the last one completed
}

// progKey identifies a cached program: everything Choose depends on but
// the rank and world, which are fixed.
type progKey struct {
	collective wire.Collective
	count      int
	root       int
	peer       int
	send       bool
	avg        bool
	small      bool // latency-optimal algorithm
	esize      int
	members    string // the member list of a subgroup call
	children   string // this rank's children in an AllReduceTree
	tag, mask  uint32
	splits     string      // an uneven AllToAll's send and receive counts
	choice     algo.Choice // the program the decision point chose
}

// plainKey identifies the program of a plain call: one of the whole world
// with no member list, children, splits or peer (a training loop's
// allreduce). Its fields are all progKey depends on for such a call (small
// follows from count and element size), and it holds no strings, so the
// per-call lookup is a comparison of a few words.
type plainKey struct {
	collective  wire.Collective
	avg         bool
	count, root int
	esize       int
	choice      algo.Choice
}

// isPlain reports whether c is a plain call (see plainKey).
func isPlain(c *Call) bool {
	sp := &c.Spec
	return sp.Members == nil && sp.Children == nil && sp.SendCounts == nil && sp.RecvCounts == nil &&
		sp.Collective != wire.PointToPoint && sp.Collective != wire.AllReduceTree
}

// groupID names the group of a call: World, a hash of its member list, or
// of one direction of a point-to-point pair. Never World for the others.
func groupID(members string) uint32 {
	if members == "" {
		return wire.World
	}
	h := fnv.New32a()
	h.Write([]byte(members))
	if id := h.Sum32(); id != wire.World {
		return id
	}
	return 1
}

// MembersKey validates a member list (distinct ranks of 0..world−1 that
// include me) and returns its canonical key.
func MembersKey(members []int, world, me int) (string, error) {
	if len(members) == 0 {
		return "", fmt.Errorf("empty member list")
	}
	seen := make([]bool, world)
	in := false
	var b strings.Builder
	for i, r := range members {
		if r < 0 || r >= world || seen[r] {
			return "", fmt.Errorf("members %v are not distinct ranks in 0..%d", members, world-1)
		}
		seen[r] = true
		in = in || r == me
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r))
	}
	if !in {
		return "", fmt.Errorf("rank %d is not among members %v", me, members)
	}
	return b.String(), nil
}

// pairKey is the group key of point-to-point messages from src to dst.
func pairKey(src, dst int) string { return "p2p:" + strconv.Itoa(src) + ">" + strconv.Itoa(dst) }

// keyOf returns the call's program key and group key.
func (e *Engine) keyOf(c *Call) (progKey, string, error) {
	sp := &c.Spec
	k := progKey{collective: sp.Collective, count: sp.Count, root: sp.Root, avg: sp.Avg, small: sp.Small(e.tun), esize: sp.ElemSize}
	var gk string
	switch {
	case sp.Collective == wire.PointToPoint:
		k.peer, k.send = sp.Peer, sp.Send
		if sp.Send {
			gk = pairKey(e.s.Rank, sp.Peer)
		} else {
			gk = pairKey(sp.Peer, e.s.Rank)
		}
	case sp.Members != nil:
		mk, err := MembersKey(sp.Members, e.s.WorldSize, e.s.Rank)
		if err != nil {
			return k, "", err
		}
		k.members, gk = mk, mk
	}
	if sp.Collective == wire.AllReduceTree {
		var b strings.Builder
		for _, c := range sp.Children {
			fmt.Fprintf(&b, "%d:%t,", c.Rank, c.Must)
		}
		k.children, k.tag, k.mask = b.String(), sp.Tag, sp.TagMask
	}
	if sp.Collective == wire.AllToAll && (sp.SendCounts != nil || sp.RecvCounts != nil) {
		k.splits = splitsKey(sp.SendCounts, sp.RecvCounts)
	}
	return k, gk, nil
}

// splitsKey renders an uneven AllToAll's counts for the program key: the
// program is built from them, so two calls share a program only when
// every count agrees.
func splitsKey(send, recv []int) string {
	b := make([]byte, 0, 8*(len(send)+len(recv))+1)
	for _, v := range send {
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, ',')
	}
	b = append(b, '/')
	for _, v := range recv {
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, ',')
	}
	return string(b)
}

// groupOf returns the counters of the group with key gk (created on first
// use).
func (e *Engine) groupOf(gk string) *group {
	if gk == "" {
		return &e.world
	}
	id := groupID(gk)
	g := e.groups[id]
	if g == nil {
		g = &group{id: id}
		e.groups[id] = g
	}
	return g
}

// groupDone is how many calls of a group this rank has completed (the
// executor's stall rules call it while a call runs, under e.mu).
func (e *Engine) groupDone(id uint32) uint64 {
	if id == wire.World {
		return e.world.done
	}
	if g := e.groups[id]; g != nil {
		return g.done
	}
	return 0
}

// idleState answers a peer's stall query from this rank's counters, when
// no call is running (a running call's executor answers instead). It never
// blocks: it is called by link readers.
func (e *Engine) idleState(id uint32) (wire.State, bool) {
	if !e.mu.TryLock() {
		return wire.State{}, false
	}
	defer e.mu.Unlock()
	g := &e.world
	if id != wire.World {
		if g = e.groups[id]; g == nil {
			return wire.State{}, true
		}
	}
	return wire.State{Done: g.done, Desc: g.last}, true
}

// program returns the cached program for k, or has the decision point
// build it.
func (e *Engine) program(k progKey, c *Call) (*plan.Program, error) {
	if e.last.p != nil && e.last.key == k {
		return e.last.p, nil
	}
	if p, ok := e.progs[k]; ok {
		e.last.key, e.last.p = k, p
		return p, nil
	}
	sp := c.Spec
	sp.Rank, sp.World = e.s.Rank, e.s.WorldSize
	p, err := e.planner.Program(sp, k.choice)
	if err != nil {
		return nil, err
	}
	e.announce(c, k.choice, p)
	if len(e.progs) >= 256 {
		clear(e.progs)
	}
	e.progs[k] = p
	e.last.key, e.last.p = k, p
	return p, nil
}

// lookup returns the call's group and its program with the choice ch: a
// plain call that repeats the previous plain call reuses its program
// without building a progKey. The group is returned even when the program
// fails (the error names the call by its descriptor).
func (e *Engine) lookup(c *Call, ch algo.Choice) (*group, *plan.Program, error) {
	plain := isPlain(c)
	sp := &c.Spec
	if k := &e.plain.key; plain && e.plain.p != nil && k.collective == sp.Collective && k.count == sp.Count &&
		k.esize == sp.ElemSize && k.root == sp.Root && k.avg == sp.Avg && k.choice == ch {
		return &e.world, e.plain.p, nil
	}
	k, gk, err := e.keyOf(c)
	k.choice = ch
	g := e.groupOf(gk)
	if err != nil {
		return g, nil, err
	}
	p, err := e.program(k, c)
	if err != nil {
		return g, nil, err
	}
	if plain {
		e.plain.key = plainKey{collective: sp.Collective, avg: sp.Avg, count: sp.Count, root: sp.Root, esize: sp.ElemSize, choice: ch}
		e.plain.p = p
	}
	return g, p, nil
}

// stepKey is the context key of a call's step label (WithStep).
type stepKey struct{}

// WithStep returns ctx carrying the application's step label step: each
// collective called with it sends the label's low 32 bits in its
// descriptor (wire.Desc.Tag) and fails, on every rank, if a peer's call
// carries another. Point-to-point calls and eager messages use the field
// for their tags and ignore it.
func WithStep(ctx context.Context, step uint64) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}

// StepOf returns the step label WithStep put in ctx.
func StepOf(ctx context.Context) (uint64, bool) {
	step, ok := ctx.Value(stepKey{}).(uint64)
	return step, ok
}

// Run validates nothing (the root package has), builds (or reuses) the
// call's program and executes it under the operation timeout. A program
// that cannot be built fails the whole communicator, so peers get a clear
// error instead of waiting.
func (e *Engine) Run(ctx context.Context, c *Call) error {
	if !e.mu.TryLock() {
		// Another goroutine's call runs: this one is queued behind it.
		if e.s.Flight == nil {
			e.mu.Lock()
		} else {
			t := e.queue(c)
			e.mu.Lock()
			e.s.Flight.Dequeue(t)
		}
	}
	err := e.runLocked(ctx, c)
	if err != nil {
		e.dumpFailedLocked(err)
	}
	e.mu.Unlock() // not deferred: this is the per-call path of every collective
	return err
}

func (e *Engine) runLocked(ctx context.Context, c *Call) error {
	d := e.planner.Decide(&c.Spec)
	if d.Probe {
		if err := e.probeLinksLocked(ctx); err != nil {
			return err
		}
		d = e.planner.Decide(&c.Spec)
	}
	if !d.Tuned() {
		return e.execLocked(ctx, c, d.Choice, e.s.Tracer)
	}
	return e.runTunedLocked(ctx, c, d)
}

// runTunedLocked runs a large AllReduce of the world among whose programs
// the decision point is measuring: it times the call when asked, and after
// the last call of a window the ranks agree on the window's time with a
// Max allreduce (untraced: it is the communicator's, not the caller's), so
// that every rank's decision point makes the same next choice.
func (e *Engine) runTunedLocked(ctx context.Context, c *Call, d algo.Decision) error {
	bytes := c.Spec.Bytes()
	var start time.Time
	if d.Timed {
		start = time.Now()
	}
	if err := e.execLocked(ctx, c, d.Choice, e.s.Tracer); err != nil {
		return err
	}
	if d.Timed {
		e.planner.Observe(bytes, time.Since(start))
	}
	if !d.Agree {
		return nil
	}
	binary.NativeEndian.PutUint64(e.tuneBuf[:], math.Float64bits(e.planner.Report(bytes)))
	agree := &e.tuneCall
	*agree = Call{Spec: algo.Spec{Collective: wire.AllReduce, Count: 1, ElemSize: 8}, DType: reduce.Float64, Op: reduce.Max, Data: e.tuneBuf[:],
		Purpose: "agreeing on the measured allreduce"}
	if err := e.execLocked(ctx, agree, algo.Choice{}, nil); err != nil {
		return err
	}
	if e.planner.Agreed(bytes, math.Float64frombits(binary.NativeEndian.Uint64(e.tuneBuf[:]))) {
		e.s.Logger.Info().Str("collective", "AllReduce").Int("bytes", bytes).Str("why", e.planner.Why(bytes)).
			Msg("the measured choice of program changed")
	}
	return nil
}

// execLocked runs one call with the program of choice ch, reported to tr
// when not nil.
func (e *Engine) execLocked(ctx context.Context, c *Call, ch algo.Choice, tr exec.Tracer) error {
	if e.closed {
		return ErrClosed
	}
	if e.mesh != nil {
		if err := e.mesh.Err(); err != nil {
			return err
		}
	}
	var siteErr error
	if c.Site != "" && e.s.Detail() {
		var differ bool
		if differ, siteErr = e.checkSiteLocked(ctx, c); siteErr != nil && !differ {
			return siteErr // the check's own exchange failed: the call never began
		}
	}
	g, p, err := e.lookup(c, ch)
	// The executor's call is filled field by field: a composite literal
	// is built in a temporary and copied, and the copy's wide loads of its
	// narrow stores stall on every small call.
	var ec exec.Call
	d := &ec.Desc
	d.Collective, d.DType, d.RedOp, d.Root = c.Spec.Collective, uint8(c.DType), uint8(c.Op), uint32(c.Spec.Root)
	d.Group, d.Tag, d.Call, d.Count = g.id, c.Tag, g.done+1, uint64(c.Spec.Count)
	ec.DType, ec.Op, ec.Data, ec.Input, ec.Done, ec.Deadline = c.DType, c.Op, c.Data, c.Input, e.doneFn, c.Deadline
	if step, ok := StepOf(ctx); ok && !d.Collective.Tagged() {
		d.Tag = uint32(step)
	}
	rec := e.s.Flight
	if err != nil {
		err = e.invalidLocked(*d, err)
		if rec != nil {
			rec.Begin(d, "", c.Purpose)
			rec.End(err)
		}
		return err
	}
	if rec != nil {
		rec.Begin(d, p.Algorithm, c.Purpose)
		if c.Site != "" {
			rec.Site(c.Site)
		}
		if siteErr != nil {
			rec.End(siteErr)
			return siteErr
		}
	} else if siteErr != nil {
		return siteErr
	}
	if tr != nil {
		tr.Begin(exec.CallInfo{Desc: *d, Algorithm: p.Algorithm, Bytes: max(len(c.Data), len(c.Input)), Ranks: e.ranks(c)})
		err = e.executor.Run(ctx, e.s.OpTimeout, p, &ec)
		tr.End(err)
	} else {
		err = e.executor.Run(ctx, e.s.OpTimeout, p, &ec)
	}
	c.Collected = ec.Collected
	if rec != nil {
		rec.End(err)
	}
	if err != nil {
		return err
	}
	g.done++
	g.last = *d
	return nil
}

// Invalid reports a call this rank cannot make (bad arguments, found by
// the root package) and, in a multi-rank job, aborts the communicator so
// the other ranks hear why at once.
func (e *Engine) Invalid(c *Call, err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	d := wire.Desc{Collective: c.Spec.Collective, DType: uint8(c.DType), RedOp: uint8(c.Op), Root: uint32(c.Spec.Root), Count: uint64(c.Spec.Count)}
	err = e.invalidLocked(d, err)
	if rec := e.s.Flight; rec != nil {
		rec.Begin(&d, "", c.Purpose)
		rec.End(err)
	}
	e.dumpFailedLocked(err)
	return err
}

func (e *Engine) invalidLocked(d wire.Desc, err error) error {
	me := e.s.Rank
	te := &transport.Error{Kind: transport.KindLocal, Rank: me, Reporter: me, Local: me,
		Detail: fmt.Sprintf("invalid %s: %v", d.Format(names), err)}
	if e.mesh != nil {
		e.mesh.Fail(te)
	}
	return te
}

// Program returns the program rank would run for c (--dump-plan) in a
// communicator with settings s whose ranks agreed on facts f: the choice
// the decision point makes first (where it measures candidates, the one
// the cost model prices best).
func Program(c *Call, rank int, s Settings, f algo.Facts) (*plan.Program, error) {
	e := newEngine(s)
	p, err := algo.NewPlanner(e.plannerConfig(), f)
	if err != nil {
		return nil, err
	}
	if s.WorldSize > 1 {
		if err := p.CheckProgram(); err != nil {
			return nil, fmt.Errorf("ringtail: RINGTAIL_ALGORITHM (Config.Algorithm): %w", err)
		}
	}
	sp := c.Spec
	sp.Rank, sp.World = rank, s.WorldSize
	d := p.Decide(&sp)
	if d.Probe {
		return nil, fmt.Errorf("ringtail: the choice needs the links measured")
	}
	return p.Program(sp, d.Choice)
}
