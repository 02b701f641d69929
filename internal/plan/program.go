package plan

import (
	"fmt"
	"strings"
)

// Buf names one of the buffers a Program works on.
type Buf uint8

// Buffers of a collective call.
const (
	// Data is the in-place buffer (AllReduce, Broadcast) or the output
	// (AllGather, ReduceScatter).
	Data Buf = iota
	// Input is the separate input of AllGather and ReduceScatter.
	Input
	// Scratch is executor-owned working space of Program.ScratchLen elements.
	Scratch
)

func (b Buf) String() string {
	switch b {
	case Data:
		return "data"
	case Input:
		return "input"
	case Scratch:
		return "scratch"
	}
	return fmt.Sprintf("buf(%d)", uint8(b))
}

// OpKind is what an Op does.
type OpKind uint8

// Operation kinds.
const (
	// Send sends Buf[Off:Off+Len] to Peer.
	Send OpKind = iota + 1
	// Recv receives Len elements from Peer into Buf[Off:].
	Recv
	// RecvReduce receives Len elements from Peer and folds them into Buf[Off:].
	RecvReduce
	// Copy copies Src[SrcOff:SrcOff+Len] to Buf[Off:] (local).
	Copy
	// Scale divides Buf[Off:Off+Len] by Div (local; the Avg finalisation).
	Scale
	// Reduce folds Src[SrcOff:SrcOff+Len] into Buf[Off:] with the call's
	// operator (local).
	Reduce
	// Post sends Buf[Off:Off+Len] to Peer as an eager message tagged Tag:
	// the peer's transport buffers it whole on arrival, without a posted
	// receive, until a Collect (or the mailbox) takes it. An evicted child
	// posts its gradient to its parent this way, at its own pace.
	Post
	// Collect folds into Buf[Off:Off+Len], with the call's operator, the
	// eager messages from Peer whose tag matches Tag under TagMask: every
	// one that has arrived, waiting for the first until the call's
	// deadline — or, with Must, until one comes (the staleness bound). A
	// parent collects its children's gradients this way. It is a receive
	// that ends at a deadline.
	Collect
)

func (k OpKind) String() string {
	switch k {
	case Send:
		return "send"
	case Recv:
		return "recv"
	case RecvReduce:
		return "recv-reduce"
	case Copy:
		return "copy"
	case Scale:
		return "scale"
	case Reduce:
		return "reduce"
	case Post:
		return "post"
	case Collect:
		return "collect"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Local reports whether the operation involves no peer.
func (k OpKind) Local() bool { return k == Copy || k == Scale || k == Reduce }

// Eager reports whether the operation is a Post or a Collect: eager
// messages are matched by sender and tag, not in order.
func (k OpKind) Eager() bool { return k == Post || k == Collect }

// Writes reports whether the operation writes its region from a peer's
// data (so it must not overlap what other operations of its step touch).
func (k OpKind) Writes() bool { return k == Recv || k == RecvReduce || k == Collect }

// Op is one operation of a step.
type Op struct {
	Kind   OpKind
	Peer   int // Send, Recv, RecvReduce
	Buf    Buf
	Off    int
	Len    int
	Src    Buf // Copy
	SrcOff int // Copy
	// Div is Scale's divisor; on a RecvReduce, a positive Div divides
	// the region once the peer's data is folded in (Avg's finalisation
	// fused into a segment's last fold).
	Div int
	// Tag and TagMask are the tag of a Post, and the tags a Collect takes
	// (tag&TagMask == Tag&TagMask). Must makes a Collect wait for one
	// message whatever the deadline.
	Tag, TagMask uint32
	Must         bool
}

func (o Op) String() string {
	switch o.Kind {
	case Send:
		return fmt.Sprintf("send %s[%d:%d] -> %d", o.Buf, o.Off, o.Off+o.Len, o.Peer)
	case Recv, RecvReduce:
		if o.Kind == RecvReduce && o.Div > 0 {
			return fmt.Sprintf("%s %s[%d:%d] <- %d, /= %d", o.Kind, o.Buf, o.Off, o.Off+o.Len, o.Peer, o.Div)
		}
		return fmt.Sprintf("%s %s[%d:%d] <- %d", o.Kind, o.Buf, o.Off, o.Off+o.Len, o.Peer)
	case Copy:
		return fmt.Sprintf("copy %s[%d:%d] <- %s[%d:%d]", o.Buf, o.Off, o.Off+o.Len, o.Src, o.SrcOff, o.SrcOff+o.Len)
	case Scale:
		return fmt.Sprintf("scale %s[%d:%d] /= %d", o.Buf, o.Off, o.Off+o.Len, o.Div)
	case Reduce:
		return fmt.Sprintf("reduce %s[%d:%d] op= %s[%d:%d]", o.Buf, o.Off, o.Off+o.Len, o.Src, o.SrcOff, o.SrcOff+o.Len)
	case Post:
		return fmt.Sprintf("post %s[%d:%d] -> %d tag %#x", o.Buf, o.Off, o.Off+o.Len, o.Peer, o.Tag)
	case Collect:
		must := "until the deadline"
		if o.Must {
			must = "at least one"
		}
		return fmt.Sprintf("collect %s[%d:%d] op= <- %d tag %#x/%#x, %s", o.Buf, o.Off, o.Off+o.Len, o.Peer, o.Tag, o.TagMask, must)
	}
	return o.Kind.String()
}

// Phase labels the part of an algorithm a step belongs to, so the executor
// can report phase changes (to a timeline) without knowing algorithms.
type Phase uint8

// Phases of the built-in algorithms.
const (
	// PhaseNone is an unlabelled step.
	PhaseNone Phase = iota
	// PhaseReduceScatter is a ring's reduce-scatter part.
	PhaseReduceScatter
	// PhaseAllGather is a ring's allgather part.
	PhaseAllGather
	// PhaseBroadcast is a chain broadcast.
	PhaseBroadcast
	// PhaseExchange is recursive doubling's pairwise exchanges.
	PhaseExchange
)

var phaseNames = [...]string{"run", "reduce-scatter", "allgather", "broadcast", "exchange"}

// String returns the phase's name: "reduce-scatter", "allgather" ...
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Step is a set of operations run together; Phase labels it for tracing.
type Step struct {
	Ops   []Op
	Phase Phase
}

// Channel is an ordered list of steps over one set of links.
type Channel struct{ Steps []Step }

// HasEager reports whether the program posts or collects eager messages.
func (p *Program) HasEager() bool {
	for _, ch := range p.Channels {
		for _, st := range ch.Steps {
			for _, o := range st.Ops {
				if o.Kind.Eager() {
					return true
				}
			}
		}
	}
	return false
}

// Program is one rank's part of a collective.
type Program struct {
	Algorithm  string // e.g. "ring", "recursive-doubling"
	Rank       int
	World      int
	DataLen    int // elements of the Data buffer
	InputLen   int // elements of the Input buffer (0 when unused)
	ScratchLen int // elements of Scratch the executor must provide
	Channels   []Channel
	// General keeps the program off the synchronous fastbox path even
	// where its messages would fit: every rank of the call must take the
	// same path, and some ranks' programs of this call need the general
	// one (they collect eager messages).
	General bool
	// Fast runs the program on the synchronous fastbox path. The decision
	// point (algo.Planner.Program) sets it from what every rank agreed
	// (fastboxes on every link) and the program (not General, no eager
	// messages, every message fits a fastbox), so every rank of a call
	// takes the same path; the executor only follows it.
	Fast bool
}

// LargestMessage is the length, in elements, of the program's longest
// send or receive.
func (p *Program) LargestMessage() int {
	n := 0
	for _, ch := range p.Channels {
		for _, st := range ch.Steps {
			for _, o := range st.Ops {
				if !o.Kind.Local() {
					n = max(n, o.Len)
				}
			}
		}
	}
	return n
}

// Validate checks that every operation stays inside its buffer and names a
// real peer other than this rank, so the executor never needs to.
func (p *Program) Validate() error {
	if p.World < 1 || p.Rank < 0 || p.Rank >= p.World {
		return fmt.Errorf("plan: rank %d of world %d", p.Rank, p.World)
	}
	size := func(b Buf) (int, error) {
		switch b {
		case Data:
			return p.DataLen, nil
		case Input:
			return p.InputLen, nil
		case Scratch:
			return p.ScratchLen, nil
		}
		return 0, fmt.Errorf("plan: unknown buffer %d", b)
	}
	for c, ch := range p.Channels {
		for s, st := range ch.Steps {
			for i, o := range st.Ops {
				where := fmt.Sprintf("plan %s rank %d channel %d step %d op %d (%v)", p.Algorithm, p.Rank, c, s, i, o)
				n, err := size(o.Buf)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				if o.Off < 0 || o.Len < 0 || o.Off+o.Len > n {
					return fmt.Errorf("%s: region outside %s of %d elements", where, o.Buf, n)
				}
				switch o.Kind {
				case Send, Recv, RecvReduce, Post, Collect:
					if o.Peer < 0 || o.Peer >= p.World || o.Peer == p.Rank {
						return fmt.Errorf("%s: bad peer", where)
					}
					if o.Div < 0 || o.Div > 0 && o.Kind != RecvReduce {
						return fmt.Errorf("%s: divisor %d", where, o.Div)
					}
				case Copy, Reduce:
					sn, err := size(o.Src)
					if err != nil {
						return fmt.Errorf("%s: %w", where, err)
					}
					if o.SrcOff < 0 || o.SrcOff+o.Len > sn {
						return fmt.Errorf("%s: source outside %s of %d elements", where, o.Src, sn)
					}
				case Scale:
					if o.Div < 1 {
						return fmt.Errorf("%s: divisor %d", where, o.Div)
					}
				default:
					return fmt.Errorf("%s: unknown op", where)
				}
			}
			if err := checkOverlap(st); err != nil {
				return fmt.Errorf("plan %s rank %d channel %d step %d: %w", p.Algorithm, p.Rank, c, s, err)
			}
		}
	}
	return nil
}

// checkOverlap rejects a step in which a region written by a receive or a
// collect overlaps a region read by a send or post or written by another
// receive: those run concurrently.
func checkOverlap(st Step) error {
	for i, a := range st.Ops {
		if !a.Kind.Writes() {
			continue
		}
		for j, b := range st.Ops {
			if i == j || b.Kind.Local() || a.Buf != b.Buf {
				continue
			}
			if a.Off < b.Off+b.Len && b.Off < a.Off+a.Len && (a.Len > 0 && b.Len > 0) {
				return fmt.Errorf("concurrent %v and %v overlap", a, b)
			}
		}
	}
	return nil
}

// String renders the program one op per line, for --dump-plan and tests.
func (p *Program) String() string {
	var b strings.Builder
	path := "queued"
	if p.Fast {
		path = "fastbox"
	}
	fmt.Fprintf(&b, "%s rank %d/%d data=%d input=%d scratch=%d path=%s\n", p.Algorithm, p.Rank, p.World, p.DataLen, p.InputLen, p.ScratchLen, path)
	for c, ch := range p.Channels {
		for s, st := range ch.Steps {
			for _, o := range st.Ops {
				fmt.Fprintf(&b, "  ch%d step%d %v\n", c, s, o)
			}
		}
	}
	return b.String()
}

// Segment splits n elements into parts nearly equal parts and returns the
// offset and length of part i (the first n%parts parts are one longer).
func Segment(n, parts, i int) (off, length int) {
	q, r := n/parts, n%parts
	off = i*q + min(i, r)
	length = q
	if i < r {
		length++
	}
	return off, length
}
